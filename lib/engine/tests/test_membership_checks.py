"""A pattern `?x p o` checked for one `?x` after another (the right side of an index join) is
answered from a sorted list of the subjects of `p o` once the lookups pass a quarter of their
number (lib/native/src/exec.rs, `Members`): the answers are pyoxigraph's, and the same when the
plan is suspended at every step (the list is not state: a resumed plan counts again)."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from quanta.engine.planning.compile import compile_query
from quanta.engine.storage import TripleStore
from quanta.testkit.engine import engine_and_reference, run_suspended_at, steps_of
from quanta.testkit.oracle import as_multiset, oxigraph_rows

EX = "http://example.org/"
P = f"PREFIX : <{EX}> "
ITEMS = 300


def dataset() -> str:
    """Items in five groups, a third of them in the US; things that are only objects (IRIs a
    subject never has, literals) checked as well."""
    lines = []
    for k in range(ITEMS):
        lines.append(f"<{EX}i{k}> <{EX}of> <{EX}g{k % 5}> .")
        lines.append(f"<{EX}i{k}> <{EX}country> <{EX}{'US' if k % 3 == 0 else 'DE'}> .")
        lines.append(f"<{EX}i{k}> <{EX}likes> <{EX}{'i' if k % 2 else 'o'}{(k * 7) % ITEMS}> .")
        lines.append(f'<{EX}i{k}> <{EX}likes> "i{k}" .')
    for k in range(40):  # subjects in the US that are no items
        lines.append(f"<{EX}shop{k}> <{EX}country> <{EX}US> .")
    return "\n".join(lines) + "\n"


QUERIES = {
    # the checked values come from objects: items, IRIs no subject has, literals; 120 checks,
    # the list (of 140 or 200 subjects) read after 35 or 50
    "what a group likes, in the US": "SELECT ?a ?i WHERE { ?a :of :g2 . ?a :likes ?i . ?i :country :US }",
    "what a group likes, in Germany": "SELECT ?a ?i WHERE { ?a :of :g1 . ?a :likes ?i . ?i :country :DE }",
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[TripleStore, ox.Store]:
    return engine_and_reference(dataset(), tmp_path_factory.mktemp("members"), "members")


@pytest.mark.parametrize("name", QUERIES)
def test_checks_from_the_list_are_pyoxigraphs_and_survive_suspension(
    stores: tuple[TripleStore, ox.Store], name: str
) -> None:
    store, reference = stores
    query = P + QUERIES[name]
    rows, steps = steps_of(store, query)
    plan = compile_query(query, store)
    assert "index_join" in str(plan.root.describe()), "checked under each mapping"
    assert as_multiset(plan.head, rows) == oxigraph_rows(reference, query)
    for n in range(0, steps + 1, 3):
        assert run_suspended_at(store, query, n) == rows, f"suspended after {n} of {steps} steps"
