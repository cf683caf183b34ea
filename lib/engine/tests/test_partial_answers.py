"""Partial answers per quantum: a DISTINCT, or a GROUP BY with COUNT(*) (`Tally`),
or an ORDER BY ... LIMIT k (`TopK`), answered quantum by quantum for the client to
merge. Merged, the answer is pyoxigraph's, however the query was suspended: every
few steps, when the page fills in the middle of a quantum's rows, when the table fills."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pyoxigraph as ox
import pytest

from quanta.engine.execute import execute
from quanta.engine.plan import PARTIAL_FORMAT
from quanta.engine.storage import TripleStore
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.errors import UnsupportedQuery
from quanta.sparql.term_rows import Row
from quanta.testkit.engine import run_in_steps, run_paged
from quanta.testkit.oracle import Solution, as_multiset, oxigraph_solutions

EX = "http://example.org/"
P = f"PREFIX : <{EX}> "
INTEGER = "http://www.w3.org/2001/XMLSchema#integer"

QUERIES = {
    "count all": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "count a pattern": "SELECT (COUNT(*) AS ?n) WHERE { ?s :knows ?o }",
    "count a repeated variable": "SELECT (COUNT(*) AS ?n) WHERE { ?x ?p ?x }",
    "count a join": "SELECT (COUNT(*) AS ?n) WHERE { ?a :knows ?b . ?b :knows ?c }",
    "count nothing": "SELECT (COUNT(*) AS ?n) WHERE { ?s :nope ?o }",
    "group by a predicate": "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p",
    "group by two, count first": "SELECT (COUNT(*) AS ?n) ?t ?o WHERE { ?s :type ?t . ?s :knows ?o } GROUP BY ?t ?o",
    "group by a BIND": "SELECT ?d (COUNT(*) AS ?n) WHERE { ?s :age ?a BIND(?a > 25 AS ?d) } GROUP BY ?d",
    "group by an unbound key": "SELECT ?u (COUNT(*) AS ?n) WHERE { ?s :type ?t OPTIONAL {} } GROUP BY ?u",
    "group by a union": "SELECT ?t (COUNT(*) AS ?n) WHERE { { ?s :type ?t } UNION { ?s :tag ?t } } GROUP BY ?t",
    "group by a subject": "SELECT ?s (COUNT(*) AS ?n) WHERE { ?s :knows ?o } GROUP BY ?s",
    "distinct subjects": "SELECT DISTINCT ?s WHERE { ?s :knows ?o }",
    "distinct": "SELECT DISTINCT ?o WHERE { ?s :knows ?o }",
    "distinct of two": "SELECT DISTINCT ?t ?o WHERE { ?s :type ?t . ?s :knows ?o }",
    "distinct with a filter": "SELECT DISTINCT ?a WHERE { ?s :age ?a FILTER(?a > 24) }",
}


def merged(query: str, head: Sequence[str], rows: Sequence[Row]) -> Counter[Solution]:
    """The answer the client makes of partial rows: counts added per group, rows once."""
    if "DISTINCT" in query:
        return Counter(set(as_multiset(list(head), rows)))
    at = head.index("n")
    totals: Counter[tuple[str | None, ...]] = Counter()
    for row in rows:
        count = row[at]
        assert count is not None and count.endswith(f"^^<{INTEGER}>")
        totals[row[:at] + row[at + 1 :]] += int(count[1 : count.index('"', 1)])
    if not totals and "GROUP BY" not in query:
        totals[()] = 0  # the implicit group of an empty input
    out = [(*key[:at], f'"{n}"^^<{INTEGER}>', *key[at:]) for key, n in totals.items()]
    return as_multiset(list(head), out)


def expected(oxi: ox.Store, query: str) -> Counter[Solution]:
    return oxigraph_solutions(oxi, P + query.replace("OPTIONAL {}", ""))


@pytest.mark.parametrize("name", QUERIES)
@pytest.mark.parametrize("steps", [4, 7, 1_000_000])
def test_merged_partial_answers_are_the_answer(
    small_stores: tuple[TripleStore, ox.Store], name: str, steps: int
) -> None:
    store, oxi = small_stores
    query = QUERIES[name].replace("OPTIONAL {}", "")
    head = execute(store, query=P + query, quantum_seconds=None, partial=True).head
    rows, quanta = run_in_steps(store, P + query, steps, partial=True)
    assert merged(query, head, rows) == expected(oxi, query)
    if steps == 4 and name not in ("count all", "count a pattern", "count nothing"):
        assert quanta > 1


@pytest.mark.parametrize("name", ["group by two, count first", "distinct of two"])
def test_a_page_full_in_the_middle_of_a_quantums_rows(small_stores: tuple[TripleStore, ox.Store], name: str) -> None:
    """The rows not handed on yet are saved in the plan and come in the next pages."""
    store, oxi = small_stores
    query = QUERIES[name]
    head, rows, _, pages = run_paged(store, P + query, None, max_results=2, partial=True)
    assert pages > 2
    assert merged(query, head, rows) == expected(oxi, query)


def test_one_quantum_is_the_whole_answer(small_stores: tuple[TripleStore, ox.Store]) -> None:
    """Unsuspended, the partial answer needs no merging: one row per group."""
    store, oxi = small_stores
    query = QUERIES["group by a predicate"]
    page = execute(store, query=P + query, quantum_seconds=None, partial=True)
    assert page.next is None
    assert as_multiset(page.head, page.rows) == expected(oxi, query)


def test_count_of_a_pattern_takes_one_step(small_stores: tuple[TripleStore, ox.Store]) -> None:
    """COUNT(*) of one pattern is HDT's count: one step, not one per triple."""
    store, _ = small_stores
    rows, quanta = run_in_steps(store, P + QUERIES["count all"], 1, partial=True)
    assert quanta <= 2 and len(rows) == 1


def test_a_count_by_subject_takes_a_step_per_subject(watdiv_store: TripleStore, watdiv_oxigraph: ox.Store) -> None:
    """GROUP BY the subject of one pattern: each subject's triples counted from the predicate
    index, so a quantum of n steps covers n subjects, not n triples."""
    query = "SELECT ?u (COUNT(*) AS ?n) WHERE { ?u <http://db.uwaterloo.ca/~galuc/wsdbm/follows> ?v } GROUP BY ?u"
    head = execute(watdiv_store, query=query, quantum_seconds=None, partial=True).head
    rows, quanta = run_in_steps(watdiv_store, query, 50, partial=True)
    assert merged(query, head, rows) == oxigraph_solutions(watdiv_oxigraph, query)
    assert quanta * 50 < 2 * len(rows) + 100 < sum(int(str(r[1]).split('"')[1]) for r in rows)


def test_saved_in_format_2_and_refused_without_partial(small_stores: tuple[TripleStore, ox.Store]) -> None:
    store, _ = small_stores
    query = P + QUERIES["distinct of two"]
    page = execute(store, query=query, quantum_seconds=None, max_results=1, partial=True)
    assert page.next is not None and pb.SavedPlan.FromString(page.next).format == PARTIAL_FORMAT
    with pytest.raises(UnsupportedQuery):
        execute(store, query=query, quantum_seconds=None)
    for other in (
        "SELECT DISTINCT ?o WHERE { ?s :knows ?o } LIMIT 3",  # a slice over partial rows: the client's
        "SELECT ?o (COUNT(?s) AS ?n) WHERE { ?s :knows ?o } GROUP BY ?o",
        "SELECT (COUNT(*) AS ?n) (COUNT(*) AS ?m) WHERE { ?s :knows ?o }",
        "SELECT ?o (COUNT(*) AS ?n) WHERE { ?s :knows ?o } GROUP BY ?o HAVING (COUNT(*) > 1)",
    ):
        with pytest.raises(UnsupportedQuery):
            execute(store, query=P + other, quantum_seconds=None, partial=True)


def test_more_rows_than_the_table_holds(watdiv_store: TripleStore, watdiv_oxigraph: ox.Store) -> None:
    """100,000 distinct rows: the table is handed on every TALLY_ROWS, each quantum's rows distinct."""
    query = "SELECT DISTINCT ?s ?o WHERE { ?s ?p ?o }"
    head, rows, _, _ = run_paged(watdiv_store, query, 0.005, partial=True)
    assert Counter(set(as_multiset(head, rows))) == Counter(set(oxigraph_solutions(watdiv_oxigraph, query)))


TOP = {
    "ages": ("SELECT ?s ?a WHERE { ?s :age ?a } ORDER BY ?a LIMIT 4", ["a"]),
    "names, descending": ("SELECT ?s ?n WHERE { ?s :name ?n } ORDER BY DESC(?n) LIMIT 3", ["n"]),
    "IRIs, two keys": ("SELECT ?s ?o WHERE { ?s :knows ?o } ORDER BY DESC(?o) ?s LIMIT 5", ["o", "s"]),
    "unbound first": (
        "SELECT ?s ?n WHERE { { ?s :type ?t } UNION { ?s :note ?n } } ORDER BY ?n ?s LIMIT 6",
        ["n", "s"],
    ),
    "a join": ("SELECT ?a ?c WHERE { ?a :knows ?b . ?b :knows ?c } ORDER BY ?c DESC(?a) LIMIT 7", ["c", "a"]),
    "more than there are": ("SELECT ?s WHERE { ?s :tag ?t } ORDER BY ?s LIMIT 100", ["s"]),
}


def solution(head: Sequence[str], row: Row) -> Solution:
    (sol,) = as_multiset(list(head), [row])
    return sol


def check_top(oxi: ox.Store, query: str, keys: list[str], head: Sequence[str], rows: Sequence[Row]) -> None:
    """The client's merge, checked: the first k of all rows handed on, in pyoxigraph's order of the whole
    answer, are the answer's first k (their ORDER BY keys: ties at the cut may be any of the tied rows)."""
    whole, limit = query.rsplit(" LIMIT ", 1)
    result = oxi.query(P + whole)
    assert isinstance(result, ox.QuerySolutions)
    names = [v.value for v in result.variables]
    # blank nodes anonymous, as as_multiset makes them
    reference = [
        tuple(sorted((n, "_:" if isinstance(s[n], ox.BlankNode) else str(s[n])) for n in names if s[n] is not None))
        for s in result
    ]
    taken: set[int] = set()
    positions = []
    for row in rows:  # each row handed on is a solution, at its first place not taken yet
        sol = solution(head, row)
        at = next(i for i, ref in enumerate(reference) if ref == sol and i not in taken)
        taken.add(at)
        positions.append(at)
    first = sorted(positions)[: int(limit)]

    def key(sol: Solution) -> list[str | None]:
        values = dict(sol)
        return [values.get(k) for k in keys]

    assert [key(reference[i]) for i in first] == [key(ref) for ref in reference[: int(limit)]]


@pytest.mark.parametrize("name", TOP)
@pytest.mark.parametrize("steps", [4, 9, 1_000_000])
def test_a_quantums_first_k_merge_into_the_first_k(
    small_stores: tuple[TripleStore, ox.Store], name: str, steps: int
) -> None:
    store, oxi = small_stores
    query, keys = TOP[name]
    head = execute(store, query=P + query, quantum_seconds=None, partial=True).head
    rows, quanta = run_in_steps(store, P + query, steps, partial=True)
    check_top(oxi, query, keys, head, rows)
    if steps == 4:
        assert quanta > 1


def test_a_top_k_page_full_before_its_rows_are_handed_on(small_stores: tuple[TripleStore, ox.Store]) -> None:
    store, oxi = small_stores
    query, keys = TOP["IRIs, two keys"]
    head, rows, _, pages = run_paged(store, P + query, None, max_results=2, partial=True)
    assert pages == 3 and len(rows) == 5  # one quantum: its 5 rows, over pages of 2
    check_top(oxi, query, keys, head, rows)


def test_terms_this_side_cannot_order_are_handed_on(make_store: Any) -> None:
    """Decimals, floats and dates have no native key: their rows all come, the integers' first k only."""
    xsd = "http://www.w3.org/2001/XMLSchema#"
    values = [f'"{i}"^^<{xsd}integer>' for i in range(20)] + [f'"{i}.5"^^<{xsd}decimal>' for i in range(5)]
    values += [f'"2020-01-0{i}"^^<{xsd}date>' for i in range(1, 4)] + [f'"{i}.25"^^<{xsd}float>' for i in range(3)]
    text = "".join(f"<{EX}s{i}> <{EX}v> {v} .\n" for i, v in enumerate(values))
    store = make_store(text)
    oxi = ox.Store()
    oxi.load(text.encode(), ox.RdfFormat.N_TRIPLES)
    query = "SELECT ?s ?v WHERE { ?s :v ?v FILTER(isNumeric(?v)) } ORDER BY ?v LIMIT 3"
    page = execute(store, query=P + query, quantum_seconds=None, partial=True)
    assert page.next is None and len(page.rows) == 3 + 5 + 3  # the integers' first 3, every decimal and float
    check_top(oxi, query, ["v"], page.head, page.rows)
    dates = "SELECT ?s ?v WHERE { ?s :v ?v } ORDER BY DESC(?v) LIMIT 2"
    _, rows, _, _ = run_paged(store, P + dates, None, partial=True)
    assert sum(r[1].endswith(f"{xsd}date>") for r in rows if r[1]) == 3


def test_min_max_and_sample_of_each_group(make_store: Any) -> None:
    """MIN, MAX and SAMPLE kept per group by the tally, merged over quanta of a few steps as the
    client merges them (its order of terms), are pyoxigraph's: with ties of equal values written
    otherwise ("1", "01", "+1": the client's last resort, the terms' strings), terms this side
    cannot order (decimals, dates: their rows are handed on as they are), and unbound values."""
    from quanta.client.ops.order import term_key

    xsd = "http://www.w3.org/2001/XMLSchema#"
    literals = ['"1"', '"01"', '"+1"', '"7"', '"-3"', '"2.5"', '"1999-01-01"', "iri", '"x"', '"x"@en']
    datatypes = ["integer"] * 5 + ["decimal", "date"] + [None] * 3
    lines = []
    for i in range(40):
        value, datatype = literals[i % len(literals)], datatypes[i % len(literals)]
        term = f"<{EX}{value}{i % 3}>" if value == "iri" else value + (f"^^<{xsd}{datatype}>" if datatype else "")
        lines.append(f"<{EX}s{i}> <{EX}g> <{EX}G{i % 4}> .\n<{EX}s{i}> <{EX}v> {term} .\n")
        if i % 5 == 0:
            lines.append(f"<{EX}t{i}> <{EX}g> <{EX}G{i % 4}> .\n")  # no value: unbound in its group
    text = "".join(lines)
    store = make_store(text)
    oxi = ox.Store()
    oxi.load(text.encode(), ox.RdfFormat.N_TRIPLES)
    query = (
        "SELECT ?g (COUNT(*) AS ?n) (MIN(?v) AS ?lo) (MAX(?v) AS ?hi) (SAMPLE(?v) AS ?any) "
        "WHERE { ?s :g ?g OPTIONAL { ?s :v ?v } } GROUP BY ?g"
    )
    solutions = oxi.query(P + query)
    assert isinstance(solutions, ox.QuerySolutions)
    counts = {str(s["g"].value): int(s["n"].value) for s in solutions}
    values: dict[str | None, list[str]] = {}  # each group's values, as the rows hold them
    for g, v in run_in_steps(store, P + "SELECT ?g ?v WHERE { ?s :g ?g OPTIONAL { ?s :v ?v } }", 10**6)[0]:
        values.setdefault(g, []).extend([v] if v else [])
    head = execute(store, query=P + query, quantum_seconds=None, partial=True).head
    at = {v: head.index(v) for v in ("g", "n", "lo", "hi", "any")}
    for steps in (3, 11, 1_000_000):
        rows, _ = run_in_steps(store, P + query, steps, partial=True)
        groups: dict[str | None, list[Row]] = {}
        for row in rows:
            groups.setdefault(row[at["g"]], []).append(row)
        assert groups.keys() == counts.keys()
        for g, grouped in groups.items():
            assert sum(int(str(r[at["n"]]).split('"')[1]) for r in grouped) == counts[str(g)]
            lo = min((r[at["lo"]] for r in grouped if r[at["lo"]]), key=term_key)
            hi = max((r[at["hi"]] for r in grouped if r[at["hi"]]), key=term_key)
            # SPARQL's MIN and MAX order as ORDER BY does (pyoxigraph leaves a mixed group's unbound)
            assert (lo, hi) == (min(values[g], key=term_key), max(values[g], key=term_key))
            assert {r[at["any"]] for r in grouped} <= set(values[g]) | {None}


def test_sums_of_each_group(make_store: Any) -> None:
    """SUM kept per group by the tally: the integers added (a row's value stands for its count's
    rows), a decimal or an integer the 64-bit total cannot hold handed on as it is with a count of
    1; the values of a group's rows, over quanta of a few steps, add up to the group's sum."""
    from decimal import Decimal

    xsd = "http://www.w3.org/2001/XMLSchema#"
    big = 2**62
    numbers = [("7", "integer"), ("-2", "integer"), ("1.5", "decimal"), (str(big), "integer"), ("003", "integer")]
    lines: list[str] = []
    totals: dict[str, Decimal] = {}
    for i in range(30):
        lexical, datatype = numbers[i % len(numbers)]
        group = f"<{EX}G{i % 3}>"
        lines.append(f'<{EX}s{i}> <{EX}g> {group} .\n<{EX}s{i}> <{EX}v> "{lexical}"^^<{xsd}{datatype}> .\n')
        totals[group[1:-1]] = totals.get(group[1:-1], Decimal(0)) + Decimal(lexical)
    store = make_store("".join(lines))
    for steps in (4, 13, 1_000_000):
        _, sums = sums_in_steps(store, steps, Decimal)
        assert sums == totals


SUMS = P + "SELECT ?g (SUM(?v) AS ?sum) (COUNT(*) AS ?n) WHERE { ?s :g ?g . ?s :v ?v } GROUP BY ?g"


def sums_in_steps(
    store: TripleStore, steps: int, number: Callable[[str], Any], skip: str = ""
) -> tuple[list[Row], dict[str, Any]]:
    """SUMS' rows suspended every `steps` steps, and per group the sum of its rows' sums
    (`number` reads a lexical form; values spelt `skip` left out)."""
    rows, _ = run_in_steps(store, SUMS, steps, partial=True)
    sums: dict[str, Any] = {}
    for row in rows:
        value = str(row[1])
        lexical = value[1 : value.index('"', 1)]
        if lexical != skip:
            sums[str(row[0])] = sums.get(str(row[0]), number("0")) + number(lexical)
    return rows, sums


def test_sums_of_floats_and_doubles_are_exact(make_store: Any) -> None:
    """SUM kept per group of floats and doubles, exactly: each partial sum is handed on with its
    exact value in decimal notation, typed as a partial sum of floats (or doubles, once one is
    added); a NaN or an infinity is handed on as it is. Over quanta of any size, each group's
    handed-on values add up to the exact sum of its values (0.1 as a float is 13421773 / 2^27),
    and a group of finite numbers comes as one row a quantum (but for a value whose exact sum with
    the others would not fit in 128 bits, handed on as it is)."""
    from fractions import Fraction

    from quanta.sparql.expr_values import DOUBLE, EXACT_SUMS, FLOAT, to_float32

    xsd = "http://www.w3.org/2001/XMLSchema#"
    numbers = [("3", "float"), ("-1.0E0", "float"), ("2", "integer"), ("0.1", "float"), ("4.25", "double"),
               ("1e300", "double"), ("-1e300", "double"), ("INF", "float")]  # fmt: skip
    groups: dict[str, list[tuple[str, str]]] = {"F": numbers[:4], "D": numbers[:5], "X": numbers}
    lines, totals = [], {}
    for group, values in groups.items():
        for i, (lexical, datatype) in enumerate(values * 4):
            lines.append(
                f'<{EX}{group}{i}> <{EX}g> <{EX}{group}> .\n<{EX}{group}{i}> <{EX}v> "{lexical}"^^<{xsd}{datatype}> .\n'
            )
        value = {"float": lambda x: Fraction(to_float32(float(x))), "double": lambda x: Fraction(float(x))}
        finite = [(x, t) for x, t in values if x != "INF"]
        totals[f"{EX}{group}"] = 4 * sum(value.get(t, Fraction)(x) for x, t in finite)
    store = make_store("".join(lines))
    for steps in (4, 13, 1_000_000):
        rows, sums = sums_in_steps(store, steps, Fraction, skip="INF")
        assert sums == totals
        if steps == 1_000_000:  # one quantum
            by_group = Counter(str(row[0]) for row in rows)
            # past 128 bits (1e300 with 0.1) or not finite: each of those values on its own
            assert by_group[f"{EX}F"] == 1 and by_group[f"{EX}D"] == 1 and by_group[f"{EX}X"] == 1 + 4 * 3
            typed = {str(row[0]): str(row[1]).rsplit("^^", 1)[1][1:-1] for row in rows if "INF" not in str(row[1])}
            assert EXACT_SUMS[typed[f"{EX}F"]] == FLOAT and EXACT_SUMS[typed[f"{EX}D"]] == DOUBLE
