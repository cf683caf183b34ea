"""The planner starts a group's joins from its most selective pattern unless another start's
order is estimated far cheaper (`planning.planner._start`): BSBM's BI Q1 shape, where the
fewest rows (a few types) lead to every item and its every review, and a few more rows (the
people of one country) to a small share of the reviews. The answers stay pyoxigraph's,
suspended or not; the estimate of a predicate's distinct objects is exact when every object is
used alike."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from quanta.engine.planning.compile import compile_query
from quanta.engine.planning.planner import distinct_objects
from quanta.engine.storage import TripleStore
from quanta.testkit.engine import engine_and_reference, run_suspended_at, steps_of
from quanta.testkit.oracle import as_multiset, oxigraph_rows

EX = "http://example.org/"
P = f"PREFIX : <{EX}> "
TYPES, ITEMS, PEOPLE, IN_DE = 10, 1000, 500, 15
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def dataset() -> str:
    """10 types of 100 items each; 5 reviews an item, 10 a person; 15 people in Germany."""
    lines = [f"<{EX}t{k}> <{RDF_TYPE}> <{EX}Type> ." for k in range(TYPES)]
    lines += [f"<{EX}i{k}> <{RDF_TYPE}> <{EX}t{k % TYPES}> ." for k in range(ITEMS)]
    for n in range(5 * ITEMS):
        lines.append(f"<{EX}r{n}> <{EX}about> <{EX}i{n % ITEMS}> .")
        lines.append(f"<{EX}r{n}> <{EX}by> <{EX}p{n % PEOPLE}> .")
    lines += [f"<{EX}p{k}> <{EX}country> <{EX}{'DE' if k < IN_DE else 'FR'}> ." for k in range(PEOPLE)]
    return "\n".join(lines) + "\n"


QUERY = P + "SELECT ?t ?r WHERE { ?t a :Type . ?i a ?t . ?r :about ?i . ?r :by ?p . ?p :country :DE }"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[TripleStore, ox.Store]:
    return engine_and_reference(dataset(), tmp_path_factory.mktemp("start"), "start")


def first_scan(store: TripleStore, query: str) -> tuple[int, int, int]:
    """The pattern the plan's joins start from: its leftmost scan."""
    node = compile_query(query, store).root.describe()
    while True:
        kind = node.WhichOneof("op")
        if kind == "scan":
            return (node.scan.s, node.scan.p, node.scan.o)
        inner = getattr(node, kind)
        node = inner.left if inner.HasField("left") else inner.input


def test_the_start_leading_to_fewer_rows_is_taken(stores: tuple[TripleStore, ox.Store]) -> None:
    store, reference = stores
    _, p, o = first_scan(store, QUERY)
    assert (p >> 1, o >> 1) == (store.locate(f"{EX}country"), store.locate(f"{EX}DE")), "the people of DE"
    rows, steps = steps_of(store, QUERY)
    assert as_multiset(compile_query(QUERY, store).head, rows) == oxigraph_rows(reference, QUERY)
    assert len(rows) == 5 * ITEMS * IN_DE // PEOPLE
    for n in range(0, steps + 1, 7):
        assert run_suspended_at(store, QUERY, n) == rows, f"suspended after {n} of {steps} steps"


def test_a_start_not_far_cheaper_stays_the_most_selective(stores: tuple[TripleStore, ox.Store]) -> None:
    """Without the people, no start leads to fewer rows: the fewest rows start."""
    store, _ = stores
    query = P + "SELECT ?t ?r WHERE { ?t a :Type . ?i a ?t . ?r :about ?i }"
    _, p, o = first_scan(store, query)
    assert (p >> 1, o >> 1) == (store.locate(RDF_TYPE), store.locate(f"{EX}Type"))


def test_distinct_objects_are_counted_exactly_when_used_alike(stores: tuple[TripleStore, ox.Store]) -> None:
    store, _ = stores
    assert distinct_objects(store, store.locate(f"{EX}about")) == pytest.approx(ITEMS)
    assert distinct_objects(store, store.locate(f"{EX}by")) == pytest.approx(PEOPLE)
    assert distinct_objects(store, store.locate(f"{EX}DE")) == 0  # a term, but no predicate
