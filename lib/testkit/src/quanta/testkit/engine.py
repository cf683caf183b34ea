"""Engine runs for tests: a query run to completion page by page as workers run it, and plans
suspended at chosen points (after exactly so many steps) and resumed from their bytes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyoxigraph as ox

from quanta.engine.execute import decode, execute, run
from quanta.engine.plan import Plan
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum, QuantumExpired
from quanta.engine.storage import TripleStore, open_store
from quanta.sparql.term_rows import Row
from quanta.testkit.data import write_hdt


def run_paged(
    store: TripleStore, query: str, quantum_seconds: float | None, max_results: int | None = None, partial: bool = False
) -> tuple[list[str], list[Row], int, int]:
    """Run to completion the way workers do (bytes between quanta); returns
    (head, rows, form, number of quanta)."""
    page = execute(store, query=query, quantum_seconds=quantum_seconds, max_results=max_results, partial=partial)
    rows = list(page.rows)
    quanta = 1
    while page.next is not None:
        page = execute(store, saved=page.next, quantum_seconds=quantum_seconds, max_results=max_results)
        rows += page.rows
        quanta += 1
    return page.head, rows, page.form, quanta


class StepQuantum(Quantum):
    """Expires after exactly `steps` steps (index entries read or scans
    opened): suspends a plan at a chosen position, deterministically."""

    __slots__ = ("steps",)

    def __init__(self, steps: int) -> None:
        super().__init__(None)
        self.steps = steps

    def start(self) -> None:
        self.budget = self.steps

    def check(self) -> None:
        self.budget = 0
        raise QuantumExpired


def run_quanta(
    store: TripleStore, query: str, quanta: Iterable[Quantum], partial: bool = False, whole: bool = False
) -> tuple[list[Row], int]:
    """Run a query (`partial`, `whole`: compiled so) one quantum of `quanta` after the other,
    through the saved plan's bytes between two; returns the rows in order and the quanta used."""
    plan = compile_query(query, store, partial, whole)
    rows: list[Row] = []
    saved = b""
    for used, quantum in enumerate(quanta, start=1):
        if saved:
            plan = Plan.load(saved, store, quantum)
        else:
            plan.ctx.quantum = quantum
        out, done = run(plan, quantum)
        rows += decode(plan, out)
        if done:
            return rows, used
        saved = plan.save()
    raise AssertionError("the query did not finish in the quanta given")


def run_in_steps(
    store: TripleStore, query: str, steps: int, partial: bool = False, whole: bool = False
) -> tuple[list[Row], int]:
    """Suspend every `steps` steps; the rows in order and how many quanta it took."""
    return run_quanta(store, query, (StepQuantum(steps) for _ in range(100_000)), partial, whole)


class CountingQuantum(Quantum):
    """Never expires; counts the steps a run takes."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        super().__init__(None)
        self.steps = 0

    def start(self) -> None:
        self.budget = 1 << 62

    def check(self) -> None:  # pragma: no cover - never reached
        raise AssertionError

    def taken(self) -> int:
        return (1 << 62) - self.budget


def steps_of(store: TripleStore, query: str, whole: bool = False) -> tuple[list[Row], int]:
    """Rows of an uninterrupted run, in order, and the steps it took."""
    plan = compile_query(query, store, whole=whole)
    quantum = CountingQuantum()
    plan.ctx.quantum = quantum
    out, done = run(plan, quantum)
    assert done
    return decode(plan, out), quantum.taken()


def run_suspended_at(store: TripleStore, query: str, steps: int) -> list[Row]:
    """Suspend after exactly `steps` steps, resume from the bytes, finish."""
    return run_quanta(store, query, [StepQuantum(steps), Quantum(None)])[0]


def engine_and_reference(text: str, folder: Path, name: str) -> tuple[TripleStore, ox.Store]:
    """N-Triples `text` as an HDT file in `folder` opened by the engine, and in pyoxigraph."""
    store = open_store(str(write_hdt(text, folder)), name=name)
    reference = ox.Store()
    reference.load(text.encode(), ox.RdfFormat.N_TRIPLES)
    return store, reference
