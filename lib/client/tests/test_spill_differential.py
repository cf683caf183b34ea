"""The spilling operators against pyoxigraph at a memory budget of a few rows:
DISTINCT, ORDER BY (with and without LIMIT/OFFSET, so top-k and the
external sort), GROUP BY, joins and their combinations, on WatDiv 100K
through the real engine (LocalTransport). Where ORDER BY orders every
projected variable the answer is one list, compared row for row; DISTINCT
without ORDER BY must be the first occurrences, in order, of the same
query without DISTINCT. Each budget makes every operator spill (many
levels of partitions at 5 rows)."""

from __future__ import annotations

import asyncio
import functools
import resource
from collections.abc import Iterator

import pyoxigraph as ox
import pytest

from quanta.client import Budgets, SmartClient
from quanta.client.in_process import LocalTransport
from quanta.engine.storage import open_store
from quanta.sparql.terms import literal
from quanta.testkit.data import shared_dir
from quanta.testkit.oracle import as_multiset, oxigraph_solutions, oxigraph_store

from .test_differential import SAMPLE

NTRIPLES = shared_dir() / "datasets" / "watdiv" / "watdiv-100k.nt.gz"
W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
REV = "http://purl.org/stuff/rev#"
OGP = "http://ogp.me/ns#"
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
LIKES = f"?s <{W}likes> ?o"

# Every projected variable is ordered: the answer is one sequence.
ORDERED = {
    "distinct-order": f"SELECT DISTINCT ?s ?o WHERE {{ {LIKES} }} ORDER BY ?s ?o",
    "distinct-order-offset": f"SELECT DISTINCT ?s ?o WHERE {{ {LIKES} }} ORDER BY ?s ?o OFFSET 500 LIMIT 20",
    "distinct-dups-desc": f"SELECT DISTINCT ?o WHERE {{ {LIKES} }} ORDER BY DESC(?o)",
    "distinct-dups-offset": f"SELECT DISTINCT ?o WHERE {{ {LIKES} }} ORDER BY ?o OFFSET 100 LIMIT 30",
    "distinct-expression": f"SELECT DISTINCT ?o WHERE {{ {LIKES} }} ORDER BY DESC(STR(?o)) ?o",
    "order": f"SELECT ?s ?o WHERE {{ {LIKES} }} ORDER BY DESC(?o) ?s",
    "order-offset-limit": f"SELECT ?s ?o WHERE {{ {LIKES} }} ORDER BY ?o ?s OFFSET 300 LIMIT 50",
    "order-small-limit": f"SELECT ?s ?o WHERE {{ {LIKES} }} ORDER BY ?o ?s LIMIT 3",
    "order-offset": f"SELECT ?o WHERE {{ {LIKES} }} ORDER BY ?o OFFSET 1000",
    # 31,254 rows: thousands of sorted runs at 5 rows, more than a process may open at once
    "order-many-runs": f"SELECT ?s ?o WHERE {{ ?s <{W}follows> ?o }} ORDER BY ?o ?s OFFSET 31000",
    "group-order": f"SELECT ?o (COUNT(*) AS ?n) WHERE {{ {LIKES} }} GROUP BY ?o ORDER BY DESC(?n) ?o",
    "group-distinct-order": (
        f"SELECT DISTINCT ?n WHERE {{ {{ SELECT ?o (COUNT(*) AS ?n) WHERE {{ {LIKES} }} GROUP BY ?o }} }} ORDER BY ?n"
    ),
    "minus-order": (
        f"SELECT ?s ?o WHERE {{ {LIKES} MINUS {{ ?s <{W}friendOf> <{W}User0> }} }} ORDER BY ?s ?o OFFSET 7 LIMIT 400"
    ),
    "join-order": (
        f"SELECT DISTINCT ?s ?r WHERE {{ {{ SELECT DISTINCT ?s ?o WHERE {{ {LIKES} FILTER(STR(?s) < '{W}User3') }} }}"
        f" {{ SELECT ?o ?r WHERE {{ ?o <{OGP}title> ?r }} ORDER BY ?r }} }} ORDER BY ?r ?s LIMIT 700"
    ),
    "optional-order": (
        f"SELECT ?s ?o ?r WHERE {{ {LIKES} OPTIONAL {{ ?o <{REV}hasReview> ?r }} }} ORDER BY ?s ?o ?r OFFSET 900"
    ),
}
# Without ORDER BY: DISTINCT is the first occurrence of each row of the same query without it.
UNORDERED = {
    "distinct-subjects": f"SELECT DISTINCT ?s WHERE {{ {LIKES} }}",
    "distinct-objects": f"SELECT DISTINCT ?o WHERE {{ ?s <{W}follows> ?x . ?x <{W}likes> ?o }}",
    "distinct-group": (
        f"SELECT DISTINCT ?n WHERE {{ {{ SELECT ?o (COUNT(*) AS ?n) WHERE {{ {LIKES} }} GROUP BY ?o }} }}"
    ),
}
BUDGETS = [5, 64]


@functools.cache
def reference_store() -> ox.Store:
    return oxigraph_store(NTRIPLES)


@pytest.fixture(autouse=True)
def common_file_limit() -> Iterator[None]:
    """The usual default of open files per process (1024): a merge must not need more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1024), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture(scope="module")
def transport() -> LocalTransport:
    # A 1 ms quantum and pages of 40 rows: every input spans many quanta.
    return LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=0.001, max_results=40)


def answer(transport: LocalTransport, query: str, memory_rows: int) -> tuple[list[str], list[tuple[str | None, ...]]]:
    async def run() -> tuple[list[str], list[tuple[str | None, ...]]]:
        # the client's operators: not the workers' running the query whole
        client = SmartClient(transport, budgets=Budgets(memory_rows=memory_rows, block_size=30), whole=False)
        execution = await client.prepare(query, "watdiv")
        rows = [row async for row in execution.solutions()]
        assert execution.context._temp is None, "the temporary files are removed"
        return execution.variables, rows

    return asyncio.run(run())


def dictionary(term: object) -> str | None:
    """A pyoxigraph term in the dictionary syntax the client's rows use."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    assert isinstance(term, ox.Literal)
    datatype = term.datatype.value
    return literal(term.value, term.language, None if term.language or datatype == XSD_STRING else datatype)


def reference_rows(query: str, head: list[str]) -> list[tuple[str | None, ...]]:
    solutions = reference_store().query(query)
    assert isinstance(solutions, ox.QuerySolutions)
    return [tuple(dictionary(s[v]) for v in head) for s in solutions]


@pytest.mark.parametrize("memory_rows", BUDGETS)
@pytest.mark.parametrize("query", list(ORDERED.values()), ids=list(ORDERED))
def test_ordered_answers_are_pyoxigraphs_row_for_row(transport: LocalTransport, query: str, memory_rows: int) -> None:
    head, rows = answer(transport, query, memory_rows)
    expected = reference_rows(query, head)
    assert len(rows) == len(expected)
    assert rows == expected


@pytest.mark.parametrize("memory_rows", BUDGETS)
@pytest.mark.parametrize("query", list(UNORDERED.values()), ids=list(UNORDERED))
def test_distinct_keeps_first_occurrences_in_order(transport: LocalTransport, query: str, memory_rows: int) -> None:
    head, rows = answer(transport, query, memory_rows)
    _, everything = answer(transport, query.replace("SELECT DISTINCT", "SELECT", 1), memory_rows)
    assert rows == list(dict.fromkeys(everything)), "each row once, where it first came"
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)
