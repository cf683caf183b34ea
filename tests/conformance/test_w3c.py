"""The W3C SPARQL 1.0 / 1.1 query-evaluation tests, run through the engine's
quanta: every query is suspended and resumed after each (tiny) quantum or two
results, so a plan state that is saved or restored wrongly shows up as a wrong
answer.

Each test is classified from its query by the service's classifier of the
server fragment (`quanta.sparql.fragment`, through `manifest.client_side`):
`test_evaluation` runs the queries of the server fragment and compares their
results; `test_refused` checks that every other query is refused with
UnsupportedQuery naming its first client-side operator (the smart client
runs it: the server must never answer it silently). See README.md for the skip and xfail lists.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from quanta.engine.execute import execute
from quanta.engine.storage import TripleStore, open_store
from quanta.sparql.errors import UnsupportedQuery

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make the helpers importable

from harness import CASES, EXPECTED_CASES, ROOT, Files, check_select, query_text
from manifest import Case, Results, client_side, read_results
from skips import ENGINE_BUGS, SKIPS, VALUE_COMPARED

QUANTUM_SECONDS = 0.0002
PAGE_RESULTS = 2
MAX_QUANTA = 100_000  # a plan that never finishes is a failure, not a hang
ASK = 1


def _classify(cases: list[Case]) -> tuple[list[object], list[object]]:
    """pytest params for the fragment's queries and for the refused ones."""
    evaluation: list[object] = []
    refused: list[object] = []
    for case in cases:
        marks: list[pytest.MarkDecorator] = []
        if case.id in SKIPS:
            marks.append(pytest.mark.skip(reason=SKIPS[case.id]))
            evaluation.append(pytest.param(case, [], id=case.id, marks=marks))
            continue
        if case.id in ENGINE_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=ENGINE_BUGS[case.id]))
        operators = client_side(query_text(case))
        (refused if operators else evaluation).append(pytest.param(case, operators, id=case.id, marks=marks))
    return evaluation, refused


EVALUATION, REFUSED = _classify(CASES)


@pytest.fixture(scope="session")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Files:
    """The test datasets, as HDT files."""
    return Files(tmp_path_factory.mktemp("w3c-hdt"), lambda path, name: open_store(path, name))


@dataclass
class Answer:
    head: list[str]
    rows: list[tuple[str | None, ...]]
    form: int
    quanta: int


def run(store: TripleStore, query: str) -> Answer:
    """Run a query to completion, suspending it after every quantum or page."""
    page = execute(store, query=query, quantum_seconds=QUANTUM_SECONDS, max_results=PAGE_RESULTS)
    head, form, rows, quanta = page.head, page.form, [], 0
    while True:
        assert page.head == head and page.form == form, "a resumed plan changed its head or form"
        assert form == ASK or len(page.rows) <= PAGE_RESULTS, "a page longer than max_results"
        rows += page.rows
        quanta += 1
        if page.next is None:
            return Answer(head, rows, form, quanta)
        assert quanta < MAX_QUANTA, f"not finished after {MAX_QUANTA} quanta"
        page = execute(store, saved=page.next, quantum_seconds=QUANTUM_SECONDS, max_results=PAGE_RESULTS)


@pytest.mark.parametrize(("case", "operators"), EVALUATION)
def test_evaluation(case: Case, operators: list[str], datasets: Files) -> None:
    """A query of the server fragment gives the expected results (named graphs,
    if the test has any, cannot matter: the query reads only the default graph)."""
    assert case.result is not None
    answer = run(datasets.store(case.data), query_text(case))
    check(read_results(case.result), answer, value_compared=case.id in VALUE_COMPARED)


@pytest.mark.parametrize(("case", "operators"), REFUSED)
def test_refused(case: Case, operators: list[str], datasets: Files) -> None:
    """A query outside the fragment (`operators` says why) is refused, never answered."""
    with pytest.raises(UnsupportedQuery) as refused:
        run(datasets.store(case.data), query_text(case))
    assert refused.value.operator == operators[0]


def check(expected: Results, answer: Answer, value_compared: bool = False) -> None:
    if expected.boolean is not None:
        assert answer.form == ASK, "expected an ASK answer"
        assert bool(answer.rows) == expected.boolean
        return
    assert answer.form != ASK, "expected SELECT results"
    check_select(expected, answer.head, answer.rows, value_compared, note=f" ({answer.quanta} quanta)")


def test_suites_found() -> None:
    """Without this, a missing suite would collect no test at all and pass."""
    assert len(CASES) >= EXPECTED_CASES, f"expected the W3C query-evaluation tests under {ROOT}, found {len(CASES)}"


def test_boolean_results_do_not_depend_on_earlier_queries(datasets: Files) -> None:
    """projexp01 after a boolean BIND over another dataset: the same answer as in a
    fresh process (a regression test: computed booleans once kept a term id
    from another plan's term table)."""
    case = next(c for c in CASES if c.id == "sparql11/project-expression/projexp01")
    other = next(c for c in CASES if c.id == "sparql11/bind/bind01")
    run(datasets.store(other.data), "SELECT ((?s = ?s) AS ?eq) WHERE { ?s ?p ?o }")
    assert case.result is not None
    check(read_results(case.result), run(datasets.store(case.data), query_text(case)))
