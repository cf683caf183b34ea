"""A variable a FILTER holds between two dates is read as a range of the dictionary
(`quanta.engine.planning.ranges`): the scan reads that range of the object index, and the
answers are those of the same FILTER over every triple, row for row and suspended at
every step, over dates written every way XSD allows (timezones from -14:00 to +14:00,
years of five digits and negative ones), dates that are not xsd:date, and ill-formed ones."""

from __future__ import annotations

import random
from pathlib import Path

import pyoxigraph as ox
import pytest

from quanta.engine.execute import execute
from quanta.engine.plan import OBJECT_RANGE_FORMAT
from quanta.engine.planning.compile import compile_query
from quanta.engine.storage import TripleStore, open_store
from quanta.plan.v1 import plan_pb2 as pb
from quanta.testkit.data import write_hdt
from quanta.testkit.engine import engine_and_reference, run_suspended_at, steps_of
from quanta.testkit.oracle import as_multiset, oxigraph_rows

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
P = f"PREFIX : <{EX}> PREFIX xsd: <{XSD}> "
TIMEZONES = ("", "Z", "+14:00", "-14:00", "+05:30", "-00:30")


def date(lex: str) -> str:
    return f'"{lex}"^^<{XSD}date>'


def tricky_values() -> list[str]:
    """Dates around the bounds the queries use, every timezone; values that only look like dates."""
    values = [date(f"2007-10-{day:02d}{tz}") for day in range(8, 14) for tz in TIMEZONES]
    values += [date(f"2007-11-{day:02d}{tz}") for day in range(5, 9) for tz in TIMEZONES]
    values += [date(v) for v in ("12007-10-20", "-2007-10-20", "2007-10-32", "2007-1-05", " 2007-10-20", "0000-01-01")]
    values += [f'"2007-10-20T00:00:00"^^<{XSD}dateTime>', '"2007-10-20"', '"2007-10-20"@en']
    values += [f'"2007-10-20"^^<{XSD}string>', f'"2007"^^<{XSD}gYear>', f"<{EX}2007-10-20>"]
    return values


def dataset(values: list[str]) -> str:
    """Each value the date of a review (and of a note, another predicate: the range holds both)."""
    lines = []
    for i, value in enumerate(values):
        lines.append(f"<{EX}r{i}> <{EX}date> {value} .")
        lines.append(f"<{EX}r{i}> <{EX}about> <{EX}product{i % 7}> .")
        if i % 3 == 0:
            lines.append(f"<{EX}n{i}> <{EX}noted> {value} .")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[TripleStore, ox.Store]:
    return engine_and_reference(dataset(tricky_values()), tmp_path_factory.mktemp("dates"), "dates")


def ranged_scans(store: TripleStore, query: str) -> int:
    """How many scans of the query's plan read a range of objects."""
    return str(pb.PhysicalPlan.FromString(compile_query(query, store).description)).count("objects {")


def unranged(query: str) -> str:
    """The same query with its FILTERs on a copy of ?d, which no scan binds: no range."""
    head, first, rest = query.partition(" FILTER(")
    return head + " BIND(?d AS ?e)" + first + rest.replace("?d", "?e")


def dates(*bounds: tuple[str, str]) -> str:
    """FILTER(?d op "day"^^xsd:date && ...) over `bounds`, (op, day) each."""
    return " && ".join(f'?d {op} "{day}"^^xsd:date' for op, day in bounds)


A_MONTH = dates((">=", "2007-10-10"), ("<", "2007-11-07"))
QUERIES = {
    "a month": f"SELECT ?r ?d WHERE {{ ?r :date ?d FILTER({A_MONTH}) }}",
    "strict and inclusive": (
        f"SELECT ?r ?d WHERE {{ ?r :date ?d FILTER({dates(('>', '2007-10-10'), ('<=', '2007-11-07'))}) }}"
    ),
    "one day": f"SELECT ?r ?d WHERE {{ ?r :date ?d FILTER({dates(('>=', '2007-10-11'), ('<=', '2007-10-11'))}) }}",
    "bounds written first, two filters": (
        'SELECT ?r ?d WHERE { ?r :date ?d FILTER("2007-10-09"^^xsd:date < ?d) FILTER("2007-11-06"^^xsd:date >= ?d) }'
    ),
    "the tighter of two bounds": "SELECT ?r ?d WHERE { ?r :date ?d FILTER("
    + dates((">=", "2007-10-01"), (">=", "2007-10-12"), ("<", "2007-11-08"), ("<", "2008-01-01"))
    + ") }",
    "joined": f"SELECT ?p ?r WHERE {{ ?r :date ?d . ?r :about ?p FILTER({A_MONTH}) }}",
    "any predicate": f"SELECT ?r ?d WHERE {{ ?r ?q ?d FILTER({A_MONTH}) }}",
    "empty": f"SELECT ?r ?d WHERE {{ ?r :date ?d FILTER({dates(('>=', '2009-01-01'), ('<', '2009-02-01'))}) }}",
}


@pytest.mark.parametrize("name", QUERIES)
def test_a_date_range_reads_the_range_and_gives_every_answer(stores: tuple[TripleStore, ox.Store], name: str) -> None:
    store, _ = stores
    query = P + QUERIES[name]
    assert ranged_scans(store, query), "the plan reads a range"
    assert not ranged_scans(store, P + unranged(QUERIES[name]))
    reference, _ = steps_of(store, P + unranged(QUERIES[name]))
    rows, steps = steps_of(store, query)
    plan = compile_query(query, store)
    assert as_multiset(plan.head, rows) == as_multiset(plan.head, reference)
    for n in range(steps + 1):
        assert run_suspended_at(store, query, n) == rows, f"suspended after {n} of {steps} steps"


def test_dates_without_timezones_are_pyoxigraphs(tmp_path: Path) -> None:
    """pyoxigraph, an independent engine, on dates as BSBM writes them (no timezone)."""
    values = [date(f"2007-{month:02d}-{day:02d}") for month in (9, 10, 11) for day in range(1, 29, 3)]
    text = dataset(values)
    store = open_store(str(write_hdt(text, tmp_path)), name="plain")
    reference = ox.Store()
    reference.load(text.encode(), ox.RdfFormat.N_TRIPLES)
    for name in ("a month", "strict and inclusive", "joined", "any predicate"):
        query = P + QUERIES[name]
        rows, _ = steps_of(store, query)
        assert as_multiset(compile_query(query, store).head, rows) == oxigraph_rows(reference, query), name


def test_random_bounds_over_random_dates(tmp_path: Path) -> None:
    """Every value that passes the FILTER lies in the range, whatever the bounds."""
    rng = random.Random(7)
    values = {
        date(f"{rng.randint(2006, 2008)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}{rng.choice(TIMEZONES)}")
        for _ in range(400)
    }
    store = open_store(str(write_hdt(dataset(sorted(values)), tmp_path)), name="random")
    for _ in range(25):
        low, high = sorted(f"{rng.randint(2006, 2008)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" for _ in "ab")
        ops = rng.choice([(">=", "<"), (">", "<="), (">=", "<=")])
        text = f"SELECT ?r ?d WHERE {{ ?r :date ?d FILTER({dates((ops[0], low), (ops[1], high))}) }}"
        head = compile_query(P + text, store).head
        ranged, whole = (as_multiset(head, steps_of(store, P + q)[0]) for q in (text, unranged(text)))
        assert ranged == whole, text


def test_a_count_by_group_over_a_range(stores: tuple[TripleStore, ox.Store]) -> None:
    """BSBM's business-intelligence query 3's piece: a tally over the range."""
    store, _ = stores
    text = f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ ?r :date ?d . ?r :about ?p FILTER({A_MONTH}) }} GROUP BY ?p"
    pages = [execute(store, query=P + q, quantum_seconds=None, partial=True) for q in (text, unranged(text))]
    assert sorted(pages[0].rows) == sorted(pages[1].rows)
    assert len(pages[0].rows) == 7


@pytest.mark.parametrize(
    "condition",
    [
        '?d >= "2007-10-10"^^xsd:date',  # one bound: values of other spellings may lie anywhere
        '?d >= "2007-10-10Z"^^xsd:date && ?d < "2007-11-07Z"^^xsd:date',  # bounds with a timezone
        '?d >= "2007-10-10" && ?d < "2007-11-07"',  # strings
        '?d >= "2007-10-10T00:00:00"^^xsd:dateTime && ?d < "2007-11-07T00:00:00"^^xsd:dateTime',
        '?d >= "12007-10-10"^^xsd:date && ?d < "12007-11-07"^^xsd:date',
    ],
)
def test_other_bounds_read_the_whole_pattern(stores: tuple[TripleStore, ox.Store], condition: str) -> None:
    store, _ = stores
    assert not ranged_scans(store, P + f"SELECT * WHERE {{ ?r :date ?d FILTER({condition}) }}")


def test_a_range_is_read_only_when_it_holds_fewer_of_the_patterns_triples(tmp_path: Path) -> None:
    """The range's triples are counted for the pattern's predicate alone (other predicates' dates
    in the range do not count): a range holding every :day is not read as one; a narrower one is,
    though the range holds many more :other triples than :day has."""
    days = [date(f"2007-10-{day:02d}") for day in range(1, 29)]
    lines = [f"<{EX}d{i}> <{EX}day> {value} ." for i, value in enumerate(days)]
    lines += [f"<{EX}o{i}-{k}> <{EX}other> {value} ." for i, value in enumerate(days) for k in range(5)]
    store = open_store(str(write_hdt("\n".join(lines) + "\n", tmp_path)), name="days")
    every = f"SELECT * WHERE {{ ?r :day ?d FILTER({dates(('>=', '2007-10-01'), ('<', '2007-11-01'))}) }}"
    some = f"SELECT * WHERE {{ ?r :day ?d FILTER({dates(('>=', '2007-10-05'), ('<', '2007-10-09'))}) }}"
    assert not ranged_scans(store, P + every)
    assert ranged_scans(store, P + some)
    rows, steps = steps_of(store, P + some)
    assert len(rows) == 4
    for n in range(steps + 1):
        assert run_suspended_at(store, P + some, n) == rows, f"suspended after {n} of {steps} steps"


def test_a_plan_that_reads_a_range_is_saved_in_format_5(stores: tuple[TripleStore, ox.Store]) -> None:
    store, _ = stores
    plan = compile_query(P + QUERIES["a month"], store)
    assert pb.SavedPlan.FromString(plan.save()).format == OBJECT_RANGE_FORMAT == 5
