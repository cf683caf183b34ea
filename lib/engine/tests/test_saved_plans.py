"""Saved plans: byte round trips, refusal of foreign or damaged plans, golden
plans from format v1 (one per operator state layout) that must keep resuming
(backward compatibility), and plans saved by one worker's store resumed by
another's."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quanta.engine.execute import decode, execute, run
from quanta.engine.operators import BUILDERS
from quanta.engine.plan import FORMAT, READABLE_FORMATS, Plan
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore, open_store
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.errors import DatasetMismatch, InvalidPlan, PlanVersion, QuantaError
from quanta.sparql.term_rows import Row
from quanta.testkit.engine import StepQuantum, steps_of

GOLDEN = Path(__file__).parent / "golden"
SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
QUERY = (GOLDEN / "v1-join.rq").read_text()


def first_page(store: TripleStore) -> bytes:
    page = execute(store, query=QUERY, quantum_seconds=None, max_results=5)
    assert page.next is not None
    return page.next


def test_plan_is_small_and_carries_the_dataset(watdiv_store: TripleStore) -> None:
    saved = pb.SavedPlan.FromString(first_page(watdiv_store))
    assert saved.dataset.name == "watdiv-100k"
    assert saved.dataset.version == watdiv_store.version
    assert len(saved.SerializeToString()) < 300


def test_refuses_another_dataset(watdiv_store: TripleStore, make_store) -> None:
    other = make_store("<http://a> <http://p> <http://b> .\n")
    with pytest.raises(DatasetMismatch):
        Plan.load(first_page(watdiv_store), other, Quantum(None))


def test_refuses_another_build_of_the_file(watdiv_store: TripleStore, tmp_path: Path) -> None:
    """Same name, other file version (e.g. the dataset was rebuilt)."""
    copy = tmp_path / "watdiv-100k.hdt"
    shutil.copy(SAMPLE, copy)
    (tmp_path / "watdiv-100k.hdt.meta.json").write_text(json.dumps({"version_id": "ab" * 16}))
    rebuilt = open_store(str(copy), name="watdiv-100k")
    with pytest.raises(DatasetMismatch, match="build abab"):
        Plan.load(first_page(watdiv_store), rebuilt, Quantum(None))


def test_a_plan_says_its_format_and_one_in_a_format_not_read_is_refused(watdiv_store: TripleStore) -> None:
    """A plan saved by a release with another layout is refused with its own error, never misread
    (plans saved before the format field, format 0, resume: the golden v1 plans below)."""
    saved = pb.SavedPlan.FromString(first_page(watdiv_store))
    assert saved.format == FORMAT
    unknown = max(READABLE_FORMATS) + 1
    saved.format = unknown
    with pytest.raises(PlanVersion, match=f"format {unknown}") as error:
        Plan.load(saved.SerializeToString(), watdiv_store, Quantum(None))
    assert error.value.kind.slug == "plan-version" and error.value.kind.status == 409


def test_refuses_garbage(watdiv_store: TripleStore) -> None:
    with pytest.raises(InvalidPlan):
        Plan.load(b"\xff\xff\xff", watdiv_store, Quantum(None))


def test_refuses_a_state_that_does_not_fit_the_plan(watdiv_store: TripleStore) -> None:
    saved = pb.SavedPlan.FromString(first_page(watdiv_store))
    saved.state.append(7)
    with pytest.raises(InvalidPlan):
        Plan.load(saved.SerializeToString(), watdiv_store, Quantum(None))
    del saved.state[-2:]
    with pytest.raises(InvalidPlan):
        Plan.load(saved.SerializeToString(), watdiv_store, Quantum(None))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_plans_fail_cleanly(watdiv_store: TripleStore, data: st.DataObject) -> None:
    """Any damage is refused with a QuantaError or runs as some other plan:
    never a crash. (Plans from clients are also signed: see the gateway.)"""
    saved = bytearray(first_page(watdiv_store))
    for _ in range(data.draw(st.integers(1, 4))):
        saved[data.draw(st.integers(0, len(saved) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(QuantaError):
        execute(watdiv_store, saved=bytes(saved), quantum_seconds=0.005)


GOLDEN_PLANS = sorted(GOLDEN.glob("*.plan"))


def operator_kinds(op: pb.Operator) -> set[str]:
    kind = op.WhichOneof("op")
    found = {kind}
    for _, value in getattr(op, kind).ListFields():
        for child in value if isinstance(value, Sequence) else [value]:
            if isinstance(child, pb.Operator):
                found |= operator_kinds(child)
    return found


def test_golden_plans_cover_every_operator() -> None:
    """Every operator's state layout has a golden plan (tests/golden/make.py)."""
    covered = set().union(
        *(
            operator_kinds(pb.PhysicalPlan.FromString(pb.SavedPlan.FromString(p.read_bytes()).plan).root)
            for p in GOLDEN_PLANS
        )
    )
    assert covered == set(BUILDERS)


@pytest.mark.parametrize("path", GOLDEN_PLANS, ids=[p.stem for p in GOLDEN_PLANS])
def test_golden_plan_resumes(watdiv_store: TripleStore, path: Path) -> None:
    """A golden plan resumes to the recorded rows: those of layout v1, saved before plans said their
    format (format 0; their rows recorded by the Python operators over pyHDT), and v2's tally."""
    expected = json.loads(path.with_suffix(".rows.json").read_text())
    page = execute(watdiv_store, saved=path.read_bytes(), quantum_seconds=None)
    assert page.next is None
    assert [list(r) for r in page.rows] == expected


CROSS_QUERIES = [(GOLDEN / f"{p.stem}.rq").read_text() for p in GOLDEN_PLANS if p.stem.startswith("v1")] + [
    "SELECT * WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/friendOf> ?f . "
    "?f <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?p } LIMIT 3000",
    "SELECT * WHERE { ?s <http://purl.org/goodrelations/offers> ?o . ?o ?p ?x }",
]


@pytest.fixture(scope="module")
def two_workers(watdiv_copy: Path) -> list[TripleStore]:
    """The same file opened twice, as two workers would: no plan pooled by one is seen by the other."""
    return [open_store(str(watdiv_copy), name="watdiv-100k") for _ in range(2)]


@pytest.mark.parametrize("query", CROSS_QUERIES, ids=[f"q{i}" for i in range(len(CROSS_QUERIES))])
def test_plans_resume_on_another_worker(two_workers: list[TripleStore], query: str) -> None:
    """Suspended by one worker at several points, resumed by the other (and back again):
    the rows of an uninterrupted run, in the same order."""
    reference, steps = steps_of(two_workers[0], query)
    for n in sorted({1, 2, steps // 7, steps // 3, steps // 2, steps - 1}):
        assert alternating(query, two_workers, n) == reference, f"suspended every {n} steps"


def alternating(query: str, stores: list[TripleStore], steps: int) -> list[Row]:
    """Run `query` in quanta of `steps` steps, each resumed on the next store."""
    rows: list[Row] = []
    saved: bytes | None = None
    for used in range(41):
        store = stores[used % 2]
        quantum = StepQuantum(steps) if used < 40 else Quantum(None)  # then finish in one
        if saved is None:
            plan = compile_query(query, store)
            plan.ctx.quantum = quantum
        else:
            plan = Plan.load(saved, store, quantum)
        got, done = run(plan, quantum)
        rows += decode(plan, got)
        if done:
            return rows
        saved = plan.save()
    raise AssertionError("not finished")


def test_resuming_the_bytes_just_saved_takes_the_plan_as_it_stands(watdiv_store: TripleStore) -> None:
    """A worker that saved these very bytes keeps the plan in that state: resuming
    them takes it without loading; any other resume loads the bytes, to the same rows."""
    from quanta.engine.plan import POOL

    page = execute(watdiv_store, query=QUERY, quantum_seconds=None, max_results=5)
    assert page.next is not None
    kept = POOL.by_state.get((id(watdiv_store), page.next))
    assert kept is not None
    fast = execute(watdiv_store, saved=page.next, quantum_seconds=None)
    assert POOL.by_state.get((id(watdiv_store), page.next)) is None  # taken
    loaded = execute(watdiv_store, saved=page.next, quantum_seconds=None)  # nothing kept: loads the bytes
    assert fast.next is None and loaded.next is None
    assert fast.rows == loaded.rows and len(fast.rows) > 0
