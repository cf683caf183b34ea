"""Queries run whole (`execute(..., whole=True)`): subqueries hash-joined, GROUP BY with COUNT,
MIN, MAX and SAMPLE, HAVING, DISTINCT and ORDER BY at any depth, all on the worker, suspended
and resumed like any plan (what the operators gathered is in the saved plan). The answer is
pyoxigraph's on WatDiv 100K (in its order where the query orders totally), the same when
suspended every few steps, or none: a query that holds a value the worker cannot order, or more
than a plan run whole may, raises Unfinished, and the client runs it in pieces."""

from __future__ import annotations

import time

import pyoxigraph as ox
import pytest

from quanta.engine.execute import execute
from quanta.engine.plan import POOL
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum, QuantumExpired
from quanta.engine.storage import TripleStore
from quanta.sparql.errors import InvalidPlan, Unfinished, UnsupportedQuery
from quanta.sparql.term_rows import Row
from quanta.testkit.engine import run_in_steps, steps_of
from quanta.testkit.oracle import as_multiset, oxigraph_solutions

P = (
    "PREFIX wsdbm: <http://db.uwaterloo.ca/~galuc/wsdbm/> PREFIX rev: <http://purl.org/stuff/rev#> "
    "PREFIX sorg: <http://schema.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
)

# name -> (query, whether its ORDER BY orders every row totally: the rows' order is checked too)
QUERIES = {
    "two groups joined, a ratio ordered (BSBM BI 3)": (
        "SELECT ?p (xsd:float(?likes) / ?reviews AS ?ratio) WHERE { "
        "{ SELECT ?p (COUNT(?u) AS ?likes) WHERE { ?u wsdbm:likes ?p } GROUP BY ?p } "
        "{ SELECT ?p (COUNT(?r) AS ?reviews) WHERE { ?p rev:hasReview ?r } GROUP BY ?p HAVING (COUNT(?r) > 1) } "
        "} ORDER BY DESC(xsd:float(?likes) / ?reviews) ?p LIMIT 15",
        True,
    ),
    "a group ordered by its count (BSBM BI 1)": (
        "SELECT ?p ?n WHERE { { SELECT ?p (COUNT(*) AS ?n) WHERE { ?u wsdbm:likes ?p . ?u wsdbm:follows ?f } "
        "GROUP BY ?p } } ORDER BY DESC(?n) ?p LIMIT 10 OFFSET 3",
        True,
    ),
    "an equality in a subquery joined with a pattern (BSBM BI 2)": (
        "SELECT ?other ?same WHERE { ?other <http://ogp.me/ns#title> ?title . FILTER(?other != wsdbm:Product0) "
        "{ SELECT ?other (COUNT(?g2) AS ?same) WHERE { wsdbm:Product0 wsdbm:hasGenre ?g . "
        "?other wsdbm:hasGenre ?g2 FILTER(?g = ?g2) } GROUP BY ?other } } ORDER BY DESC(?same) ?other LIMIT 10",
        True,
    ),
    "NOT EXISTS over a top-k subquery (BSBM BI 7)": (
        "SELECT ?p WHERE { { SELECT ?p WHERE { { SELECT ?p (COUNT(?u) AS ?n) WHERE { ?u wsdbm:likes ?p } "
        "GROUP BY ?p } } ORDER BY DESC(?n) ?p LIMIT 100 } "
        "FILTER NOT EXISTS { ?p sorg:caption ?c } }",
        False,
    ),
    "a subquery's own variable named as one outside": (
        "SELECT ?u ?x WHERE { ?u wsdbm:follows ?x . "
        "{ SELECT ?u WHERE { ?u wsdbm:likes ?x } ORDER BY ?u ?x LIMIT 300 } } ORDER BY ?u ?x LIMIT 50",
        True,
    ),
    "MIN, MAX and COUNT per group, HAVING": (
        "SELECT ?u (MIN(?r) AS ?lo) (MAX(?r) AS ?hi) (COUNT(*) AS ?n) WHERE { ?v rev:reviewer ?u ; rev:rating ?r } "
        "GROUP BY ?u HAVING (COUNT(*) >= 2)",
        False,
    ),
    "dates ordered (BSBM explore 8)": (
        "SELECT ?u ?d WHERE { ?u sorg:birthDate ?b BIND(STRDT(?b, xsd:date) AS ?d) } ORDER BY DESC(?d) ?u LIMIT 20",
        True,
    ),
    "dates and dateTimes ordered together": (
        "SELECT ?u ?d WHERE { { ?u sorg:birthDate ?b BIND(STRDT(?b, xsd:date) AS ?d) } UNION "
        '{ ?u sorg:birthDate ?b BIND(STRDT(CONCAT(?b, "T23:00:00-05:00"), xsd:dateTime) AS ?d) } } '
        "ORDER BY ?d ?u LIMIT 30",
        True,
    ),
    "MIN and MAX of dates": (
        "SELECT ?g (MIN(?d) AS ?lo) (MAX(?d) AS ?hi) WHERE { ?u wsdbm:gender ?g ; sorg:birthDate ?b "
        "BIND(STRDT(?b, xsd:date) AS ?d) } GROUP BY ?g",
        False,
    ),
    "COUNT of nothing, no key": ("SELECT (COUNT(*) AS ?n) (MIN(?o) AS ?lo) WHERE { ?s wsdbm:nope ?o }", False),
    "COUNT of everything, no key": ("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", False),
    "a group of an unbound key": (
        "SELECT ?e (COUNT(*) AS ?n) WHERE { ?u wsdbm:follows ?f OPTIONAL { ?u sorg:email ?e } } "
        "GROUP BY ?e ORDER BY DESC(?n) ?e LIMIT 5",
        True,
    ),
    "DISTINCT, ordered, a slice": (
        "SELECT DISTINCT ?c WHERE { ?u wsdbm:likes ?p . ?p sorg:contentRating ?c } ORDER BY ?c LIMIT 3 OFFSET 1",
        True,
    ),
    "ORDER BY without LIMIT": ("SELECT ?u ?f WHERE { ?u wsdbm:friendOf ?f . ?u sorg:email ?e } ORDER BY ?f ?u", True),
    "a join on a variable one side may leave unbound": (
        "SELECT ?u ?e ?n WHERE { "
        "{ SELECT ?u ?e WHERE { ?u wsdbm:follows ?f OPTIONAL { ?u sorg:email ?e } } ORDER BY ?u ?f LIMIT 30 } "
        "{ SELECT ?e (COUNT(*) AS ?n) WHERE { ?x sorg:email ?e } GROUP BY ?e } }",
        False,
    ),
}


def whole(
    store: TripleStore, query: str, quantum_s: float | None = None, cpu_clock: bool = False
) -> tuple[list[str], list[Row]]:
    """The answer, in quanta of `quantum_s`, each resumed from the saved plan's bytes."""
    page = execute(store, query=query, quantum_seconds=quantum_s, whole=True, cpu_clock=cpu_clock)
    rows = page.rows
    while page.next is not None:
        POOL.free.clear()  # no plan left in the pool: each quantum loads the bytes
        page = execute(store, saved=page.next, quantum_seconds=quantum_s, cpu_clock=cpu_clock)
        rows += page.rows
    return page.head, rows


@pytest.mark.parametrize("name", QUERIES)
def test_run_whole_is_pyoxigraphs_answer(name: str, watdiv_store: TripleStore, watdiv_oxigraph: ox.Store) -> None:
    query, total = QUERIES[name]
    head, rows = whole(watdiv_store, P + query)
    expected = oxigraph_solutions(watdiv_oxigraph, P + query)
    assert as_multiset(head, rows) == expected and rows
    if total:
        result = watdiv_oxigraph.query(P + query)
        assert isinstance(result, ox.QuerySolutions)
        ordered = [tuple(None if s[v] is None else str(s[v]) for v in head) for s in result]
        assert [tuple(_nt(t) for t in row) for row in rows] == ordered


def test_sample_is_one_of_the_groups_values(watdiv_store: TripleStore, watdiv_oxigraph: ox.Store) -> None:
    query = P + "SELECT ?u (SAMPLE(?r) AS ?any) WHERE { ?v rev:reviewer ?u ; rev:rating ?r } GROUP BY ?u"
    _, rows = whole(watdiv_store, query)
    values = oxigraph_solutions(watdiv_oxigraph, P + "SELECT DISTINCT ?u ?any WHERE { ?v rev:reviewer ?u ; "
                                "rev:rating ?any }")  # fmt: skip
    assert rows and set(as_multiset(["u", "any"], rows)) <= set(values)


@pytest.mark.parametrize("name", QUERIES)
def test_suspended_every_few_steps_it_answers_the_same(name: str, watdiv_store: TripleStore) -> None:
    """Resume(Suspend(P)) = P for plans run whole: suspended about 25 times along the run
    (every 3 steps at least), each quantum from the saved bytes, the same rows in the same order."""
    query = P + QUERIES[name][0]
    expected, steps = steps_of(watdiv_store, query, whole=True)
    every = max(3, steps // 25)
    rows, quanta = run_in_steps(watdiv_store, query, every, whole=True)
    assert rows == expected
    assert quanta > 1 or steps <= every


def test_a_small_subquery_drives_the_patterns_of_its_group(watdiv_store: TripleStore) -> None:
    """BSBM BI 2's shape: the subquery (one product's genre matches, grouped) has fewer rows than
    the pattern beside it (everything with a title): the pattern runs under each of its rows, and
    no table holds what the pattern reads."""
    query = P + QUERIES["an equality in a subquery joined with a pattern (BSBM BI 2)"][0]
    operators = _tags(compile_query(query, watdiv_store, whole=True).root.spec)
    assert "hashjoin" not in operators and {"join", "tally"} <= operators


def _tags(spec: object) -> set[str]:
    """The operators of a native plan spec (nested tuples, each one's tag first)."""
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        return {spec[0]}.union(*(_tags(part) for part in spec[1:]))
    if isinstance(spec, tuple | list):
        return set().union(*(_tags(part) for part in spec))
    return set()


def test_a_query_that_does_not_finish_in_its_quantum_is_suspended(watdiv_store: TripleStore) -> None:
    """Its groups so far are in the saved plan (format 6); resumed, it ends with every one."""
    query = P + "SELECT ?u (COUNT(*) AS ?n) WHERE { ?u wsdbm:follows ?f . ?f wsdbm:follows ?g } GROUP BY ?u"
    first = execute(watdiv_store, query=query, quantum_seconds=0.0005, whole=True)
    assert first.next is not None and not first.rows
    assert as_multiset(*whole(watdiv_store, query, quantum_s=0.002)) == as_multiset(*whole(watdiv_store, query))


def test_a_damaged_saved_plan_run_whole_is_refused(watdiv_store: TripleStore) -> None:
    query = P + "SELECT ?u (COUNT(*) AS ?n) WHERE { ?u wsdbm:follows ?f . ?f wsdbm:follows ?g } GROUP BY ?u"
    saved = execute(watdiv_store, query=query, quantum_seconds=0.0005, whole=True).next
    assert saved is not None
    POOL.free.clear()
    POOL.by_state.clear()
    with pytest.raises(InvalidPlan):
        execute(watdiv_store, saved=saved[: len(saved) - 40], quantum_seconds=None)


def test_a_quantum_on_the_cpu_clock_counts_work_not_waiting(watdiv_store: TripleStore) -> None:
    """A worker's quantum for a query run whole is CPU time (`cpu_clock`): a thread kept off the
    CPU (here, asleep) spends none of it; the native core's clock ends it all the same."""
    cpu, wall = Quantum(0.02, cpu=True), Quantum(0.02)
    cpu.start()
    wall.start()
    time.sleep(0.05)
    cpu.check()
    with pytest.raises(QuantumExpired):
        wall.check()
    query = P + "SELECT ?u (COUNT(*) AS ?n) WHERE { ?u wsdbm:follows ?f . ?f wsdbm:follows ?g } GROUP BY ?u"
    assert execute(watdiv_store, query=query, quantum_seconds=0.0005, whole=True, cpu_clock=True).next
    assert execute(watdiv_store, query=query, quantum_seconds=60, whole=True, cpu_clock=True).next is None


def test_a_value_the_worker_cannot_order_leaves_it_unfinished(watdiv_store: TripleStore) -> None:
    """Decimals have no exact place in the worker's order (the client's sort has): unfinished,
    never a wrong order."""
    query = P + "SELECT ?v ?d WHERE { ?v rev:rating ?r BIND(xsd:decimal(?r) / 3 AS ?d) } ORDER BY ?d LIMIT 5"
    with pytest.raises(Unfinished):
        whole(watdiv_store, query)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT ?u (GROUP_CONCAT(?r) AS ?s) WHERE { ?v rev:reviewer ?u ; rev:rating ?r } GROUP BY ?u",
        "SELECT (COUNT(DISTINCT ?u) AS ?n) WHERE { ?v rev:reviewer ?u }",
        "SELECT ?u (COUNT(?e) AS ?n) WHERE { ?u wsdbm:follows ?f OPTIONAL { ?u sorg:email ?e } } GROUP BY ?u",
        "SELECT ?x WHERE { { SELECT ?x WHERE { ?x wsdbm:likes ?p } LIMIT 2 } UNION { ?x wsdbm:follows ?y } }",
    ],
    ids=["GROUP_CONCAT", "COUNT DISTINCT", "COUNT of a variable sometimes unbound", "a subquery in a UNION"],
)
def test_what_a_worker_does_not_run_whole_is_refused(query: str, watdiv_store: TripleStore) -> None:
    with pytest.raises(UnsupportedQuery):
        whole(watdiv_store, P + query)


def _nt(term: str | None) -> str | None:
    """A term of the rows as pyoxigraph's str() writes it."""
    if term is None or term.startswith(('"', "_:")):
        return term
    return f"<{term}>"
