"""GROUP BY, DISTINCT and ORDER BY ... LIMIT shipped to the server (function
shipping): the server answers per quantum with its partial DISTINCT, counted
rows or first k rows, and the client merges them (computing the aggregates,
each row weighed by its count, or keeping the first k of all).
Against pyoxigraph on WatDiv 100K, through the real engine with a 1 ms quantum
and pages of 40 rows (every query spans many quanta and pages), at a memory
budget of 500 rows (a DISTINCT beyond it spills; none is refused)."""

from __future__ import annotations

import asyncio
from typing import Any

import pyoxigraph as ox
import pytest

from quanta.client import Budgets, SmartClient
from quanta.client.in_process import LocalTransport
from quanta.client.ops.base import Op
from quanta.client.ops.hashjoin import HashJoin
from quanta.client.ops.remote import Remote
from quanta.engine.storage import open_store
from quanta.sparql.syntax import AlgebraNode, IriTerm, Var
from quanta.sparql.terms import nt_term
from quanta.testkit.oracle import as_multiset, oxigraph_solutions

from .test_differential import BUDGETS, PAGE_RESULTS, QUANTUM_S, SAMPLE, check, reference_store

P = (
    "PREFIX wsdbm: <http://db.uwaterloo.ca/~galuc/wsdbm/> PREFIX rev: <http://purl.org/stuff/rev#> "
    "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> PREFIX gr: <http://purl.org/goodrelations/> "
)
RATED = "?v rev:rating ?r . ?v rev:reviewer ?u"
W = "http://db.uwaterloo.ca/~galuc/wsdbm/"

QUERIES = {
    "count per predicate": "SELECT ?p (COUNT(*) AS ?n) (COUNT(?o) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?p",
    "numbers, each row weighed": (
        "SELECT ?r (COUNT(*) AS ?n) (SUM(xsd:integer(?r)) AS ?s) (AVG(xsd:decimal(?r)) AS ?a) "
        "(SUM(xsd:double(?r) * 2) AS ?d) (GROUP_CONCAT(?r) AS ?all) WHERE { ?v rev:rating ?r } GROUP BY ?r"
    ),
    "no key": f"SELECT (COUNT(*) AS ?n) (SUM(xsd:integer(?r)) AS ?s) WHERE {{ {RATED} }}",
    "no key, no row": "SELECT (COUNT(*) AS ?n) (SUM(?r) AS ?s) (AVG(?r) AS ?a) WHERE { ?v rev:rating 'none' }",
    "sum of a non-number": "SELECT ?r (SUM(?r) AS ?s) (COUNT(*) AS ?n) WHERE { ?v rev:rating ?r } GROUP BY ?r",
    "expression key": (
        "SELECT ?big (COUNT(*) AS ?n) (SUM(xsd:integer(?r)) AS ?s) WHERE { ?v rev:rating ?r ; rev:reviewer ?u } "
        "GROUP BY (xsd:integer(?r) > 5 AS ?big)"
    ),
    "count of a sometimes-bound variable": (
        "SELECT ?v (COUNT(?r) AS ?c) (COUNT(*) AS ?n) WHERE { { ?v rev:rating ?r } UNION { ?v rev:title ?t } } "
        "GROUP BY ?v HAVING (COUNT(*) > 1)"
    ),
    "distinct aggregates": (
        "SELECT ?u (COUNT(DISTINCT ?r) AS ?d) (SUM(DISTINCT xsd:integer(?r)) AS ?s) (MIN(?r) AS ?lo) "
        f"WHERE {{ {RATED} }} GROUP BY ?u"
    ),
    "sample": "SELECT ?r (SAMPLE(?r) AS ?any) (MAX(?r) AS ?hi) WHERE { ?v rev:rating ?r } GROUP BY ?r",
    "count distinct past the memory budget": "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s wsdbm:friendOf ?o }",
    "two distinct arguments": (
        f"SELECT (COUNT(DISTINCT ?r) AS ?d) (COUNT(DISTINCT ?u) AS ?e) (MAX(?u) AS ?hi) WHERE {{ {RATED} }}"
    ),
    "distinct": "SELECT DISTINCT ?o WHERE { ?s wsdbm:follows ?o }",
    "distinct, limited": "SELECT DISTINCT ?r WHERE { ?v rev:rating ?r } LIMIT 4",
}


@pytest.fixture(scope="module")
def transport() -> LocalTransport:
    return LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=QUANTUM_S,
                          max_results=PAGE_RESULTS)  # fmt: skip


def run(
    transport: LocalTransport, query: str, budgets: Budgets = BUDGETS, whole: bool = False
) -> tuple[list[str], list[Any], Any]:
    """The query's answer in pieces (what this module tests), or `whole` first."""

    async def go() -> tuple[list[str], list[Any], Any]:
        execution = await SmartClient(transport, budgets=budgets, whole=whole).prepare(query, "watdiv")
        rows = [row async for row in execution.solutions()]
        return execution.variables, rows, execution

    return asyncio.run(go())


def remotes(op: Op) -> list[Remote]:
    """The pieces (not the whole query a worker is asked to run first: `Whole`)."""
    found = [op] if isinstance(op, Remote) and not op.piece.whole else []
    for child in op.children():
        found += remotes(child)
    return found


@pytest.mark.parametrize("name", QUERIES)
def test_shipped_and_merged_is_pyoxigraphs_answer(transport: LocalTransport, name: str) -> None:
    query = P + QUERIES[name]
    head, rows, execution = run(transport, query)
    (remote,) = remotes(execution.plan.root)
    assert remote.piece.partial, remote.text
    if "LIMIT" in query:  # any 4 of the distinct rows
        every = oxigraph_solutions(reference_store(), query.removesuffix(" LIMIT 4"))
        assert len(rows) == 4 and as_multiset(head, rows) <= every
    else:
        assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)


def test_min_beside_count_is_the_tallys(transport: LocalTransport) -> None:
    """MIN of an entity beside COUNT(*): the tally keeps one MIN per group (not one row per
    solution), so the group is shipped and moves fewer bytes than its rows."""
    query = P + f"SELECT ?r (COUNT(*) AS ?n) (MIN(?v) AS ?first) (MAX(?u) AS ?last) WHERE {{ {RATED} }} GROUP BY ?r"
    head, rows, execution = run(transport, query)
    assert all(r.piece.partial for r in remotes(execution.plan.root))
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)
    _, _, plain = run(transport, P + f"SELECT ?r ?v ?u WHERE {{ {RATED} }}")
    assert execution.context.requester.bytes * 10 < plain.context.requester.bytes


def test_a_group_whose_tally_would_not_reduce_ships_rows(transport: LocalTransport) -> None:
    """COUNT(DISTINCT) of an entity beside COUNT(*): one tallied row per solution; the rows are
    shipped instead."""
    query = P + f"SELECT ?r (COUNT(*) AS ?n) (COUNT(DISTINCT ?v) AS ?d) WHERE {{ {RATED} }} GROUP BY ?r"
    head, rows, execution = run(transport, query)
    assert not any(r.piece.partial for r in remotes(execution.plan.root))
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)


def test_counted_rows_move_fewer_bytes(transport: LocalTransport) -> None:
    """GROUP BY ?p over every triple: a few counted rows a quantum, not every triple."""
    query = "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p"
    _, _, shipped = run(transport, query)
    _, _, plain = run(transport, "SELECT ?p WHERE { ?s ?p ?o }")
    assert shipped.context.requester.bytes * 10 < plain.context.requester.bytes


def test_a_group_past_the_memory_budget_is_refused_no_more() -> None:
    """COUNT(DISTINCT) of one group with more values than the memory budget: the DISTINCT spills."""
    transport = LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=None, max_results=None)
    query = P + QUERIES["count distinct past the memory budget"]
    head, rows, _ = run(transport, query, Budgets(block_size=30, memory_rows=50))
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)


def test_a_piece_sends_back_only_what_is_used_outside_it(transport: LocalTransport) -> None:
    """Under a GROUP BY the client runs (COUNT(DISTINCT) beside SUM: not shipped), the piece
    projects the key and the arguments, not the review it joins through; a subquery's ?v is not
    the outer ?v (SPARQL's scoping), so the two do not join on it."""
    grouped = P + f"SELECT ?u (SUM(xsd:integer(?r)) AS ?s) (COUNT(DISTINCT ?r) AS ?d) WHERE {{ {RATED} }} GROUP BY ?u"
    head, rows, execution = run(transport, grouped)
    (remote,) = remotes(execution.plan.root)
    selected = remote.text.split(" WHERE")[0].split()[1:]
    assert len(selected) == 2 and "?u" in selected, remote.text  # the rating and ?u, not the review
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), grouped)
    scoped = P + ("SELECT ?v ?n WHERE { ?v rev:rating '1' { SELECT (COUNT(?v) AS ?n) WHERE { ?v rev:rating ?r } } }")
    head, rows, _ = run(transport, scoped)
    assert rows and as_multiset(head, rows) == oxigraph_solutions(reference_store(), scoped)


TOP = {
    "IRIs": "SELECT ?u ?p WHERE { ?u wsdbm:likes ?p } ORDER BY ?p ?u LIMIT 10",
    "descending, an offset": "SELECT ?u ?p WHERE { ?u wsdbm:likes ?p } ORDER BY DESC(?p) ?u LIMIT 5 OFFSET 20",
    "strings of a join": ("SELECT ?v ?t WHERE { ?v rev:reviewer ?u . ?v rev:title ?t } ORDER BY ?t ?v LIMIT 12"),
    "numbers": "SELECT ?v ?k WHERE { ?v rev:rating ?r BIND(xsd:integer(?r) AS ?k) } ORDER BY DESC(?k) ?v LIMIT 9",
    "numbers the workers do not order": (
        "SELECT ?v ?d WHERE { ?v rev:rating ?r BIND(xsd:decimal(?r) / 3 AS ?d) } ORDER BY ?d ?v LIMIT 4"
    ),
}


@pytest.mark.parametrize("name", TOP)
def test_first_k_of_each_quantum_give_the_first_k(transport: LocalTransport, name: str) -> None:
    query = P + TOP[name]
    head, rows, execution = run(transport, query)
    (remote,) = remotes(execution.plan.root)
    assert remote.piece.partial and " ORDER BY " in remote.text, remote.text
    check(reference_store(), query, "select", head, rows)


def test_an_expression_ordered_by_is_computed_in_the_piece(transport: LocalTransport) -> None:
    """ORDER BY DESC(xsd:integer(?r)) ?v orders every row (one review a rating): the rows are pyoxigraph's."""
    query = P + "SELECT ?v ?r WHERE { ?v rev:rating ?r } ORDER BY DESC(xsd:integer(?r)) ?v LIMIT 7"
    head, rows, execution = run(transport, query)
    (remote,) = remotes(execution.plan.root)
    assert remote.piece.partial and "BIND(" in remote.text, remote.text
    result = reference_store().query(query)
    assert isinstance(result, ox.QuerySolutions)
    expected = [tuple(str(s[v]) for v in head) for s in result]
    assert [tuple(nt_term(t) for t in row) for row in rows] == expected


def test_quanta_client_stats_say_where_an_operator_ran(
    transport: LocalTransport, capsys: pytest.CaptureFixture[str]
) -> None:
    """`quanta client --stats`: each request of a shipped GROUP BY is marked `partial`, a plain one
    not, and the query sent whole first `whole` (`unfinished` when the worker cannot run it whole:
    here it orders by a decimal)."""
    from quanta.client.cli import _stats

    async def go(query: str, whole: bool = True) -> None:
        execution = await SmartClient(transport, on_request=_stats, whole=whole).prepare(P + query, "watdiv")
        _ = [row async for row in execution.solutions()]

    grouped = "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p"
    asyncio.run(go(grouped, whole=False))
    shipped = capsys.readouterr().err.splitlines()
    asyncio.run(go("SELECT ?s WHERE { ?s wsdbm:likes ?o }"))
    plain = capsys.readouterr().err.splitlines()
    asyncio.run(go(grouped + " ORDER BY (?n / 7)"))
    lines = capsys.readouterr().err.splitlines()
    tried = [line for line in lines if " whole " in line]  # its quanta, to where it stopped
    pieces = lines[len(tried) :]
    assert len(shipped) > 1 and all(line.startswith("query ok partial ") for line in shipped)
    assert plain and all(line.startswith("query ok ") and " partial " not in line for line in plain)
    assert all(line.startswith("query ok whole ") for line in tried[:-1])
    assert tried[-1].startswith("query unfinished whole "), "a decimal: no place in the worker's order"
    assert len(pieces) > 1 and all(line.startswith("query ok partial ") for line in pieces)


def test_the_plan_says_what_runs_where(transport: LocalTransport) -> None:
    """`quanta client --stats` prints the plan that ran: the query sent whole, and when a worker could
    not run it whole, its pieces, planned then: operators the workers run are in a piece's query
    (GROUP BY's partial answers, OPTIONAL, NOT EXISTS), the client's are lines of their own."""
    query = P + (
        "SELECT ?p (COUNT(*) AS ?n) WHERE { ?u wsdbm:likes ?p OPTIONAL { ?u <http://schema.org/email> ?e } "
        "FILTER NOT EXISTS { ?u wsdbm:follows ?f } } GROUP BY ?p ORDER BY ?n"
    )
    preempted = LocalTransport(transport.stores, quantum_s=1e-4, max_results=PAGE_RESULTS)
    lines = run(preempted, query, whole=True)[2].plan.explain().splitlines()
    assert len(lines) == 2 and lines[0] == "Whole" and lines[1].strip().startswith("Remote[default graph] whole ")
    unfinished = query.replace("ORDER BY ?n", "ORDER BY (?n / 7)")  # a decimal: no place in the worker's order
    lines = run(preempted, unfinished, whole=True)[2].plan.explain().splitlines()
    assert lines[0] == "Whole" and lines[1].strip().startswith("Remote[default graph] whole ")
    (remote,) = [line.strip() for line in lines[2:] if line.strip().startswith("Remote")]
    assert all(part in remote for part in ("GROUP BY ?p", "OPTIONAL", "NOT EXISTS"))
    assert any(line.strip().startswith("OrderBy") for line in lines)


def test_the_cost_model_ships_a_distinct_count_that_reduces(transport: LocalTransport) -> None:
    """COUNT(DISTINCT ?u) beside COUNT(*), ?u a user with many friendships: the file's counts
    bound the tally's rows (users times one gender each) far below the solutions, so the
    workers tally; the plan says what was estimated. Without the file's counts (a client over
    HTTP), the rows are shipped."""
    from quanta.client.plan import costs

    query = P + (
        "SELECT ?g (COUNT(*) AS ?n) (COUNT(DISTINCT ?u) AS ?users) "
        "WHERE { ?u wsdbm:friendOf ?f . ?u wsdbm:gender ?g } GROUP BY ?g"
    )
    head, rows, execution = run(transport, query)
    assert all(r.piece.partial for r in remotes(execution.plan.root))
    assert "tally of >= " in execution.plan.explain()
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)
    store = transport.stores["watdiv"][None]
    star = AlgebraNode(
        "BGP",
        triples=[(Var("u"), IriTerm(f"{W}friendOf"), Var("f")), (Var("u"), IriTerm(f"{W}gender"), Var("g"))],
    )
    estimate = costs.tally(star, [Var("g"), Var("u")], store)
    assert estimate is not None and estimate.reduces
    assert estimate.solutions == store.estimate(0, store.locate(f"{W}friendOf"), 0)
    assert costs.tally(star, [Var("g"), Var("u")], None) is None
    assert costs.tally(star, [Var("g"), Var("f")], store) is None  # ?f: no bound on its values


def test_sum_and_avg_are_the_tallys(transport: LocalTransport) -> None:
    """SUM and AVG of one expression beside COUNT(*): the workers add the integers per group
    (one BIND, one sum for both; AVG divides by the counts here)."""
    query = P + (
        f"SELECT ?u (SUM(xsd:integer(?r)) AS ?s) (AVG(xsd:integer(?r)) AS ?a) (COUNT(*) AS ?n) "
        f"WHERE {{ {RATED} }} GROUP BY ?u"
    )
    head, rows, execution = run(transport, query)
    (remote,) = remotes(execution.plan.root)
    assert remote.piece.partial and remote.text.count("SUM(") == 1 and "GROUP BY ?u " in remote.text + " "
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)


def test_a_group_beside_a_one_row_subquery_is_the_tallys(transport: LocalTransport) -> None:
    """BSBM's business-intelligence Q6: GROUP BY over a pattern joined to a sub-select of one row
    (an average, no GROUP BY). The pattern's tally is shipped, the workers adding the scores as
    floats (integral: exact), and the one row joined to each group here, where MIN of its average
    is computed: per quantum, a row a group (ten ratings), not one per solution."""
    average = "{ SELECT (AVG(xsd:float(?r)) AS ?all) WHERE { ?v rev:rating ?r } }"
    for key, test in (("?u", "> MIN(?all) * 1.2"), ("?r", "< MAX(?all)")):
        query = P + (
            f"SELECT {key} (AVG(xsd:float(?r)) AS ?a) (COUNT(*) AS ?n) WHERE {{ {average} {RATED} }} "
            f"GROUP BY {key} HAVING (AVG(xsd:float(?r)) {test})"
        )
        head, rows, execution = run(transport, query)
        pieces = remotes(execution.plan.root)
        assert len(pieces) == 2 and all(r.piece.partial for r in pieces)
        assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)
    _, _, plain = run(transport, P + f"SELECT ?r WHERE {{ {RATED} }}")
    assert execution.context.requester.bytes * 10 < plain.context.requester.bytes


def test_sub_selects_are_joined_on_shared_variables_first(transport: LocalTransport) -> None:
    """Three grouped sub-selects, the second sharing no variable with the first, the third with
    both (BSBM's business-intelligence Q5): joined first to third, then second, on keys each
    time; never the first two's cross product."""
    query = P + (
        f"SELECT * WHERE {{ {{ SELECT ?u (COUNT(*) AS ?a) WHERE {{ {RATED} }} GROUP BY ?u }} "
        f"{{ SELECT ?r (COUNT(*) AS ?b) WHERE {{ {RATED} }} GROUP BY ?r }} "
        f"{{ SELECT ?u ?r (COUNT(*) AS ?c) WHERE {{ {RATED} }} GROUP BY ?u ?r }} }}"
    )
    head, rows, execution = run(transport, query)

    def joins(op: Op) -> list[HashJoin]:
        return ([op] if isinstance(op, HashJoin) else []) + [j for c in op.children() for j in joins(c)]

    assert len(joins(execution.plan.root)) == 2 and all(j.keys for j in joins(execution.plan.root))
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)


def test_a_pattern_filtering_groups_by_their_key_joins_the_group(transport: LocalTransport) -> None:
    """BSBM's business-intelligence Q2: triple patterns whose only variable is a sub-select's
    group key, beside it, have one solution per key at most: they go into the sub-select's
    pattern, and the whole is one shipped tally. Beside a pattern that may repeat a key, or
    under a key the sub-select may leave unbound, they stay a join: the same answers."""
    grouped = f"{{ SELECT ?u (COUNT(?r) AS ?n) WHERE {{ {RATED} }} GROUP BY ?u }}"
    moved = P + f"SELECT * WHERE {{ ?u a wsdbm:Role1 . FILTER(?u != wsdbm:User0) {grouped} }}"
    head, rows, execution = run(transport, moved)
    (remote,) = remotes(execution.plan.root)
    assert remote.piece.partial and "Role1" in remote.text
    assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), moved)
    unbound = "{ SELECT ?u (COUNT(*) AS ?n) WHERE { ?v rev:rating ?r OPTIONAL { ?v rev:reviewer ?u } } GROUP BY ?u }"
    for kept in (f"?u wsdbm:follows ?x . {grouped}", f"?u a wsdbm:Role1 . {unbound}"):
        query = P + f"SELECT * WHERE {{ {kept} }}"
        head, rows, execution = run(transport, query)
        tallies = [r.text for r in remotes(execution.plan.root) if r.piece.partial]
        assert len(tallies) == 1 and "follows" not in tallies[0] and "Role1" not in tallies[0]
        assert as_multiset(head, rows) == oxigraph_solutions(reference_store(), query)


def test_sums_of_doubles_are_exact_whatever_the_quanta(transport: LocalTransport) -> None:
    """SUM and AVG of doubles that are not integral (a rating over 3): the workers add them
    exactly and hand on exact partial sums, the client adds those exactly and rounds once, so the
    answer is the exact sum rounded, whether the query runs in many 1 ms quanta or in one."""
    from fractions import Fraction

    from quanta.sparql.expr_values import nearest_double

    query = P + (
        f"SELECT ?u (SUM(xsd:double(?r) / 3) AS ?s) (AVG(xsd:double(?r) / 3) AS ?a) (COUNT(*) AS ?n) "
        f"WHERE {{ {RATED} }} GROUP BY ?u"
    )
    values: dict[str, list[Fraction]] = {}
    for solution in reference_store().query(P + f"SELECT ?u ?r WHERE {{ {RATED} }}"):  # type: ignore[union-attr]
        values.setdefault(solution["u"].value, []).append(Fraction(float(solution["r"].value) / 3))
    whole = LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=None, max_results=None)
    answers = []
    for t in (transport, whole):
        head, rows, execution = run(t, query)
        (remote,) = remotes(execution.plan.root)
        assert remote.piece.partial and "SUM(" in remote.text
        answers.append(sorted(rows))
    assert answers[0] == answers[1]
    at = {name: i for i, name in enumerate(head)}
    for row in answers[0]:
        exact = sum(values[row[at["u"]]], Fraction(0))
        count = len(values[row[at["u"]]])
        assert float(row[at["s"]].split('"')[1]) == nearest_double(exact)
        assert float(row[at["a"]].split('"')[1]) == nearest_double(exact / Fraction(count))


def test_a_query_a_worker_runs_whole_takes_one_request() -> None:
    """Two grouped subqueries joined and ordered by a ratio (BSBM's business intelligence 3):
    sent whole, one request when it finishes in the quantum; in pieces when it does not (10 µs),
    with the same answer, pyoxigraph's in its order."""
    store = open_store(str(SAMPLE), "watdiv")
    query = P + (
        "SELECT ?p (xsd:float(?likes) / ?reviews AS ?ratio) WHERE { "
        "{ SELECT ?p (COUNT(?u) AS ?likes) WHERE { ?u wsdbm:likes ?p } GROUP BY ?p } "
        "{ SELECT ?p (COUNT(?r) AS ?reviews) WHERE { ?p rev:hasReview ?r } GROUP BY ?p } "
        "} ORDER BY DESC(xsd:float(?likes) / ?reviews) ?p LIMIT 10"
    )
    result = reference_store().query(query)
    assert isinstance(result, ox.QuerySolutions)
    expected = [(str(s["p"].value), str(s["ratio"].value)) for s in result]
    answers = {}
    for quantum_s in (None, 1e-5):
        local = LocalTransport({"watdiv": {None: store}}, quantum_s=quantum_s, max_results=PAGE_RESULTS)
        _, rows, execution = run(local, query, whole=True)
        assert execution.plan.explain().startswith("Whole\n")
        answers[quantum_s] = (execution.requests, [(p, float(r.split('"')[1])) for p, r in rows])
    assert answers[None][0] == 1 and answers[1e-5][0] > 2
    assert answers[None][1] == answers[1e-5][1] == [(p, float(r)) for p, r in expected]


def test_a_shape_that_does_not_finish_is_tried_whole_less_often() -> None:
    """Queries of one shape (other constants) that come back unfinished are tried whole again
    after 1, 3, 7... of them went in pieces (63 at most); one that finishes resets the count."""
    from quanta.client.plan.whole import WholeTries, shape
    from quanta.sparql.parse import parse

    def of(text: str) -> object:
        return shape(parse(P + text).algebra.algebra)

    grouped = "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p wsdbm:%s FILTER(?n > %d) } GROUP BY ?p"
    a, b = of(grouped % ("User1", 3)), of(grouped % ("Product9", 70))
    assert a == b and a != of("SELECT ?s (COUNT(*) AS ?n) WHERE { ?s ?p wsdbm:User1 } GROUP BY ?s")
    tries = WholeTries()
    sent = []
    for _ in range(200):
        sent.append(tries.worth_trying(a))
        if sent[-1]:
            tries.outcome(a, finished=False)
    assert [i for i, tried in enumerate(sent) if tried] == [0, 2, 6, 14, 30, 62, 126, 190]
    tries.outcome(a, finished=True)
    assert all(tries.worth_trying(a) for _ in range(3))


@pytest.mark.parametrize(
    "query",
    [
        "SELECT ?u (SUM(xsd:float(?r) / 3) AS ?s) (AVG(xsd:double(?r) / 7) AS ?a) (COUNT(*) AS ?n) "
        "WHERE { ?v rev:reviewer ?u ; rev:rating ?r } GROUP BY ?u",
        "SELECT (SUM(xsd:double(?r) * 1.0e-3) AS ?s) (AVG(xsd:float(?r)) AS ?a) WHERE { ?v rev:rating ?r }",
        "SELECT (SUM(?r) AS ?s) (AVG(xsd:float(?r)) AS ?a) (COUNT(*) AS ?n) WHERE { ?v rev:rating 'none' }",
        "SELECT ?u (AVG(xsd:float(?r)) AS ?a) WHERE { ?v rev:reviewer ?u ; rev:rating ?r } GROUP BY ?u "
        "HAVING (AVG(xsd:float(?r)) > 5.5) ORDER BY DESC(?a) ?u LIMIT 20",
    ],
    ids=["sums and averages per group", "of everything", "of nothing", "ordered by an average"],
)
def test_sums_and_averages_run_whole_are_the_clients(query: str) -> None:
    """SUM and AVG of floats and doubles run whole are rounded once, as the client rounds its
    exact sums (`expr_values.read_sum`): the same terms, to the last digit, as in pieces."""
    local = LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=None, max_results=None)

    async def go(whole: bool) -> tuple[list[str], list[Any], int]:
        execution = await SmartClient(local, whole=whole).prepare(P + query, "watdiv")
        rows = [row async for row in execution.solutions()]
        return execution.variables, rows, execution.requests

    head, whole_rows, requests = asyncio.run(go(True))
    _, piece_rows, _ = asyncio.run(go(False))
    assert requests == 1 and whole_rows, "answered whole, in one request"
    assert as_multiset(head, whole_rows) == as_multiset(head, piece_rows)
    if "ORDER BY" in query:
        assert whole_rows == piece_rows
