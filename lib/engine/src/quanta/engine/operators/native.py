"""Running a plan natively: `NativeTree` hands the operator tree (`Operator.spec`)
to the native core once (`quanta.native._core.Pipeline`, over the store:
lib/native/src/exec.rs), then drives it quantum after quantum. The
native core iterates the operators as preemptable iterators: a step counted
for every index entry or VALUES row read and every scan opened, the clock read
every `CHECK_EVERY` steps, a suspension possible between any two steps, and the
state saved and loaded in the operators' flat layout (pre-order), so a plan is
suspended and resumed anywhere. Rows come back in batches of ids that never go
further than the page takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator
from quanta.engine.quantum import CHECK_EVERY, Quantum, QuantumExpired
from quanta.native._core import Pipeline
from quanta.native._core import StateTooLarge as NativeStateTooLarge
from quanta.sparql.errors import StateTooLarge
from quanta.sparql.term_table import TermSaver

Demand = Callable[[], int | None]
Rows = Any  # quanta.native._core.Rows: rows of ids in one flat buffer, read as a sequence of tuples
FIRST_BATCH = 32  # rows; doubles up to MAX_BATCH within a quantum
MAX_BATCH = 4096
DONE, EXPIRED = 1, 2  # quanta.native._core.DONE / EXPIRED


class NativeTree:
    """A plan's operator tree (`operator`: its root) running natively."""

    __slots__ = ("ctx", "operator", "pipeline", "spec")

    def __init__(self, ctx: Context, operator: Operator) -> None:
        self.ctx = ctx
        self.operator = operator
        self.spec = operator.spec()  # as the native core has it
        self.pipeline: Pipeline = ctx.store.pipeline(ctx.width, self.spec, ctx.terms)

    def rows(self) -> Rows:
        """An empty buffer for this plan's rows (`quanta.native._core.Rows`)."""
        return self.pipeline.rows()

    def batches(self, into: Rows) -> Iterator[None]:
        """Appends the rows to `into` a batch at a time, and yields after each: a batch
        ends right after its last row, so a consumer that stops between two batches
        leaves the state exact. A batch is at most what the page still wants
        (`Context.wanted`). Raises QuantumExpired when the quantum is over."""
        pipeline = self.pipeline
        ctx = self.ctx
        quantum = ctx.quantum
        native_clock = type(quantum) is Quantum  # else (tests' quanta) the native core calls quantum.check()
        pipeline.restart()
        size = FIRST_BATCH
        while True:
            wanted = ctx.wanted()
            step = size if wanted is None else max(1, min(size, wanted))
            left = quantum.deadline - quantum.now() if native_clock else None
            try:
                status = pipeline.run(into, step, quantum, QuantumExpired, left, CHECK_EVERY, quantum.cpu)
            except NativeStateTooLarge as error:
                raise StateTooLarge(str(error)) from None
            yield
            if status == EXPIRED:
                raise QuantumExpired
            if status == DONE:
                return
            size = min(size * 2, MAX_BATCH)

    def save_state(self, saver: TermSaver) -> bytes:
        """The state as `SavedPlan.state` (field 3 of the message, packed natively); the terms
        outside the dictionary that it holds renumbered by `saver`."""
        self.pipeline.trim()  # the conditions' caches live for a quantum: a pooled plan keeps none
        return self.pipeline.save(saver.id)

    def load_state(self, saved: bytes) -> None:
        """The whole state of `saved` (a SavedPlan's bytes), read and checked natively; the ids of
        terms outside the dictionary that mappings hold (renumbered in saved states) mapped here."""
        self.pipeline.load(saved, self.ctx.terms.restored)

    def describe(self) -> pb.Operator:
        return self.operator.describe()

    def progress(self) -> float:
        """The estimated fraction done, 0..1 (`quanta.engine.progress`)."""
        return float(self.pipeline.progress())
