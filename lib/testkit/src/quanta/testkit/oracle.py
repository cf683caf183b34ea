"""The independent reference engine of the tests, pyoxigraph: its answers as multisets of
solutions, and ours in the same form to compare with them."""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, cast

import pyoxigraph as ox

from quanta.sparql.terms import nt_term

Solution = tuple[tuple[str, str], ...]  # (variable, N-Triples term) pairs, sorted, unbound left out


def _solution(pairs: Iterable[tuple[str, str | None]]) -> Solution:
    # blank node labels are local to each engine: compare them as anonymous
    return tuple(sorted((v, "_:" if t.startswith("_:") else t) for v, t in pairs if t is not None))


def oxigraph_store(ntriples: Path) -> ox.Store:
    """The independent engine over an N-Triples file (gzipped if it ends in .gz)."""
    store = ox.Store()
    if ntriples.suffix != ".gz":
        store.bulk_load(path=ntriples, format=ox.RdfFormat.N_TRIPLES)
        return store
    with cast(IO[bytes], gzip.open(ntriples)) as f:  # a GzipFile reads bytes, whatever typeshed calls it
        store.bulk_load(f, ox.RdfFormat.N_TRIPLES)
    return store


def oxigraph_rows(store: ox.Store, query: str, default_graph: Sequence[str] = ()) -> Counter[Solution] | bool:
    """The reference answer of a SELECT or ASK query: a multiset of solutions, or the boolean.
    `default_graph`: the named graphs whose merge is the default graph (else the store's)."""
    graphs: list[ox.NamedNode | ox.BlankNode | ox.DefaultGraph] = [ox.NamedNode(g) for g in default_graph]
    return oxigraph_answer(store.query(query, default_graph=graphs or None))


def oxigraph_answer(result: ox.QuerySolutions | ox.QueryBoolean | ox.QueryTriples) -> Counter[Solution] | bool:
    """Results pyoxigraph gave or read (`parse_query_results`) as `oxigraph_rows` gives them."""
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    assert isinstance(result, ox.QuerySolutions), "a SELECT or ASK query"
    names = [v.value for v in result.variables]
    return Counter(_solution((n, None if s[n] is None else str(s[n])) for n in names) for s in result)


def oxigraph_count(store: ox.Store, pattern: str) -> int:
    """How many solutions a group graph pattern (`?s <p> ?o .`, say) has."""
    solutions = store.query(f"SELECT (COUNT(*) AS ?c) WHERE {{ {pattern} }}")
    assert isinstance(solutions, ox.QuerySolutions)
    (row,) = solutions
    count = row["c"]
    assert isinstance(count, ox.Literal)
    return int(count.value)


def oxigraph_solutions(store: ox.Store, query: str) -> Counter[Solution]:
    """The reference answer of a SELECT query."""
    rows = oxigraph_rows(store, query)
    assert not isinstance(rows, bool), "a SELECT query"
    return rows


def as_multiset(head: list[str], rows: Iterable[tuple[str | None, ...]]) -> Counter[Solution]:
    """Our rows (one dictionary-syntax term per head variable, None = unbound) as solutions
    comparable with oxigraph_rows."""
    return Counter(
        _solution((v, None if t is None else nt_term(t)) for v, t in zip(head, row, strict=True)) for row in rows
    )
