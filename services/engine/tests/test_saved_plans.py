"""Saved plans: byte round trips, refusal of foreign or damaged plans, and
a golden plan from format v1 that must keep resuming (backward compatibility)."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quanta.engine.errors import DatasetMismatch, InvalidPlan, QuantaError
from quanta.engine.execute import execute
from quanta.engine.plan import Plan
from quanta.engine.quantum import Quantum
from quanta.engine.storage.hdt import HdtStore
from quanta.plan.v1 import plan_pb2 as pb

GOLDEN = Path(__file__).parent / "golden"
SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
QUERY = (GOLDEN / "v1-join.rq").read_text()


def first_page(store: HdtStore) -> bytes:
    page = execute(store, query=QUERY, quantum_seconds=None, max_results=5)
    assert page.next is not None
    return page.next


def test_plan_is_small_and_carries_the_dataset(watdiv_store: HdtStore) -> None:
    saved = pb.SavedPlan.FromString(first_page(watdiv_store))
    assert saved.dataset.name == "watdiv-100k"
    assert saved.dataset.version == watdiv_store.version
    assert len(saved.SerializeToString()) < 300


def test_refuses_another_dataset(watdiv_store: HdtStore, make_store) -> None:  # type: ignore[no-untyped-def]
    other = make_store("<http://a> <http://p> <http://b> .\n")
    with pytest.raises(DatasetMismatch):
        Plan.load(first_page(watdiv_store), other, Quantum(None))


def test_refuses_another_build_of_the_file(watdiv_store: HdtStore, tmp_path: Path) -> None:
    """Same name, other file version (e.g. the dataset was rebuilt)."""
    copy = tmp_path / "watdiv-100k.hdt"
    shutil.copy(SAMPLE, copy)
    (tmp_path / "watdiv-100k.hdt.meta.json").write_text(json.dumps({"version_id": "ab" * 16}))
    rebuilt = HdtStore(str(copy), name="watdiv-100k")
    with pytest.raises(DatasetMismatch, match="build abab"):
        Plan.load(first_page(watdiv_store), rebuilt, Quantum(None))


def test_refuses_garbage(watdiv_store: HdtStore) -> None:
    with pytest.raises(InvalidPlan):
        Plan.load(b"\xff\xff\xff", watdiv_store, Quantum(None))


def test_refuses_a_state_that_does_not_fit_the_plan(watdiv_store: HdtStore) -> None:
    saved = pb.SavedPlan.FromString(first_page(watdiv_store))
    saved.state.append(7)
    with pytest.raises(InvalidPlan):
        Plan.load(saved.SerializeToString(), watdiv_store, Quantum(None))
    del saved.state[-2:]
    with pytest.raises(InvalidPlan):
        Plan.load(saved.SerializeToString(), watdiv_store, Quantum(None))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_plans_fail_cleanly(watdiv_store: HdtStore, data: st.DataObject) -> None:
    """Any damage is refused with a QuantaError or runs as some other plan:
    never a crash. (Plans from clients are also signed: see the gateway.)"""
    saved = bytearray(first_page(watdiv_store))
    for _ in range(data.draw(st.integers(1, 4))):
        saved[data.draw(st.integers(0, len(saved) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(QuantaError):
        execute(watdiv_store, saved=bytes(saved), quantum_seconds=0.005)


def test_golden_v1_plan_resumes(watdiv_store: HdtStore) -> None:
    """A plan saved by format v1 (tests/golden/v1-join.plan, made by
    `python tests/golden/make.py`) resumes to the recorded rows."""
    expected = json.loads((GOLDEN / "v1-join.rows.json").read_text())
    page = execute(watdiv_store, saved=(GOLDEN / "v1-join.plan").read_bytes(), quantum_seconds=None)
    assert page.next is None
    assert [list(r) for r in page.rows] == expected
