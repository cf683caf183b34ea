"""Helpers for tests of the engine and of the services built on it: HDT
files written by the real converter, plans run suspended at chosen points,
and the reference answers of an independent engine (pyoxigraph)."""

from __future__ import annotations

import gzip
import os
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from quanta.engine.execute import decode, execute, run
from quanta.engine.plan import Plan
from quanta.engine.quantum import Quantum, QuantumExpired
from quanta.engine.sparql.compile import compile_query
from quanta.engine.storage import TripleStore
from quanta.sparql.terms import nt_term

if TYPE_CHECKING:
    import pyoxigraph

Row = tuple[str | None, ...]
Solution = tuple[tuple[str, str], ...]  # (variable, N-Triples term) pairs, sorted, unbound left out


def _solution(pairs: Iterable[tuple[str, str | None]]) -> Solution:
    # blank node labels are local to each engine: compare them as anonymous
    return tuple(sorted((v, "_:" if t.startswith("_:") else t) for v, t in pairs if t is not None))


def shared_dir() -> Path:
    """The project's shared data (WatDiv, W3C tests): $QUANTA_SHARED, or a
    `shared/` folder beside the working directory or one of its parents."""
    if "QUANTA_SHARED" in os.environ:
        return Path(os.environ["QUANTA_SHARED"])
    for base in (Path.cwd(), *Path.cwd().parents):
        if (base / "shared" / "datasets").is_dir():
            return base / "shared"
    return Path.cwd().parent / "shared"


def converter() -> str:
    """The project's HDT writer, `quanta-rdf2hdt` (services/loader/rust, built
    by `make install`): what `quanta load` runs, so tests read files exactly
    as the service's loader writes them."""
    from quanta.loader.build import converter

    return converter()


def write_hdt(ntriples: str | bytes, directory: Path, name: str = "data") -> Path:
    """N-Triples -> an HDT file, through the real writer."""
    source = directory / f"{name}.nt"
    if isinstance(ntriples, str):
        source.write_text(ntriples)
    else:
        source.write_bytes(ntriples)
    target = directory / f"{name}.hdt"
    subprocess.run(
        [
            converter(),
            "--output",
            str(target),
            "--dataset-iri",
            f"http://example.org/{name}",
            "--input",
            "nt",
            "plain",
            source.as_uri(),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    return target


def oxigraph_store(ntriples: Path) -> pyoxigraph.Store:
    """The independent engine over an N-Triples file (gzipped if it ends in .gz)."""
    import pyoxigraph as ox

    store = ox.Store()
    if ntriples.suffix != ".gz":
        store.bulk_load(path=ntriples, format=ox.RdfFormat.N_TRIPLES)
        return store
    with cast(IO[bytes], gzip.open(ntriples)) as f:  # a GzipFile reads bytes, whatever typeshed calls it
        store.bulk_load(f, ox.RdfFormat.N_TRIPLES)
    return store


def oxigraph_rows(store: pyoxigraph.Store, query: str, default_graph: Sequence[str] = ()) -> Counter[Solution] | bool:
    """The reference answer of a SELECT or ASK query: a multiset of solutions, or the boolean.
    `default_graph`: the named graphs whose merge is the default graph (else the store's)."""
    import pyoxigraph as ox

    graphs: list[ox.NamedNode | ox.BlankNode | ox.DefaultGraph] = [ox.NamedNode(g) for g in default_graph]
    return oxigraph_answer(store.query(query, default_graph=graphs or None))


def oxigraph_answer(
    result: pyoxigraph.QuerySolutions | pyoxigraph.QueryBoolean | pyoxigraph.QueryTriples,
) -> Counter[Solution] | bool:
    """Results pyoxigraph gave or read (`parse_query_results`) as `oxigraph_rows` gives them."""
    import pyoxigraph as ox

    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    assert isinstance(result, ox.QuerySolutions), "a SELECT or ASK query"
    names = [v.value for v in result.variables]
    return Counter(_solution((n, None if s[n] is None else str(s[n])) for n in names) for s in result)


def oxigraph_count(store: pyoxigraph.Store, pattern: str) -> int:
    """How many solutions a group graph pattern (`?s <p> ?o .`, say) has."""
    import pyoxigraph as ox

    solutions = store.query(f"SELECT (COUNT(*) AS ?c) WHERE {{ {pattern} }}")
    assert isinstance(solutions, ox.QuerySolutions)
    (row,) = solutions
    count = row["c"]
    assert isinstance(count, ox.Literal)
    return int(count.value)


def oxigraph_solutions(store: pyoxigraph.Store, query: str) -> Counter[Solution]:
    """The reference answer of a SELECT query."""
    rows = oxigraph_rows(store, query)
    assert not isinstance(rows, bool), "a SELECT query"
    return rows


def as_multiset(head: list[str], rows: Iterable[Row]) -> Counter[Solution]:
    """Our rows (dictionary syntax) as solutions comparable with oxigraph_rows."""
    return Counter(
        _solution((v, None if t is None else nt_term(t)) for v, t in zip(head, row, strict=True)) for row in rows
    )


def run_paged(
    store: TripleStore, query: str, quantum_seconds: float | None, max_results: int | None = None, partial: bool = False
) -> tuple[list[str], list[Row], int, int]:
    """Run to completion the way workers do (bytes between quanta); returns
    (head, rows, form, number of quanta)."""
    page = execute(store, query=query, quantum_seconds=quantum_seconds, max_results=max_results, partial=partial)
    rows = list(page.rows)
    quanta = 1
    while page.next is not None:
        page = execute(store, saved=page.next, quantum_seconds=quantum_seconds, max_results=max_results)
        rows += page.rows
        quanta += 1
    return page.head, rows, page.form, quanta


class StepQuantum(Quantum):
    """Expires after exactly `steps` steps (index entries read or scans
    opened): suspends a plan at a chosen position, deterministically."""

    __slots__ = ("steps",)

    def __init__(self, steps: int) -> None:
        super().__init__(None)
        self.steps = steps

    def start(self) -> None:
        self.budget = self.steps

    def check(self) -> None:
        self.budget = 0
        raise QuantumExpired


def run_quanta(
    store: TripleStore, query: str, quanta: Iterable[Quantum], partial: bool = False
) -> tuple[list[Row], int]:
    """Run a query one quantum of `quanta` after the other, through the saved
    plan's bytes between two; returns the rows in order and the quanta used."""
    plan = compile_query(query, store, partial)
    rows: list[Row] = []
    saved = b""
    for used, quantum in enumerate(quanta, start=1):
        if saved:
            plan = Plan.load(saved, store, quantum)
        else:
            plan.ctx.quantum = quantum
        out, done = run(plan, quantum)
        rows += decode(plan, out)
        if done:
            return rows, used
        saved = plan.save()
    raise AssertionError("the query did not finish in the quanta given")


def run_in_steps(store: TripleStore, query: str, steps: int, partial: bool = False) -> tuple[list[Row], int]:
    """Suspend every `steps` steps; the rows in order and how many quanta it took."""
    return run_quanta(store, query, (StepQuantum(steps) for _ in range(100_000)), partial)


class CountingQuantum(Quantum):
    """Never expires; counts the steps a run takes."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        super().__init__(None)
        self.steps = 0

    def start(self) -> None:
        self.budget = 1 << 62

    def check(self) -> None:  # pragma: no cover - never reached
        raise AssertionError

    def taken(self) -> int:
        return (1 << 62) - self.budget


def steps_of(store: TripleStore, query: str) -> tuple[list[Row], int]:
    """Rows of an uninterrupted run, in order, and the steps it took."""
    plan = compile_query(query, store)
    quantum = CountingQuantum()
    plan.ctx.quantum = quantum
    out, done = run(plan, quantum)
    assert done
    return decode(plan, out), quantum.taken()


def run_suspended_at(store: TripleStore, query: str, steps: int) -> list[Row]:
    """Suspend after exactly `steps` steps, resume from the bytes, finish."""
    return run_quanta(store, query, [StepQuantum(steps), Quantum(None)])[0]
