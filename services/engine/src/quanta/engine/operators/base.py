"""Preemptable iterators (Definition 3.1 of the SaGe paper).

`iterate(mu)` is a generator that continues from the operator's current
state and yields mappings extending `mu`. Each operator keeps its state in
attributes that are consistent whenever it is paused, i.e. while it waits on
a child or on its consumer: before yielding, an operator records the mapping
as consumed. Suspension is therefore possible between any two mappings: a
scan raises `QuantumExpired` before reading its next index entry, the
generators unwind, and the state is read from the attributes (Stop + Save).

A plan is saved in two parts: `describe()` gives the static operator tree
once, at compile time; `save_state` appends the changing state, in
pre-order, as a flat list of integers, and `load_state` reads it back (Load).
"""

from __future__ import annotations

from collections.abc import Iterator

from quanta.engine.context import Context
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.term_table import Mapping, TermSaver

State = Iterator[int]


class Operator:
    __slots__ = ("ctx",)

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        """Mappings extending `mu`, from the current state on."""
        raise NotImplementedError

    def reset(self) -> None:
        """Back to the initial state, to run again for another input mapping."""
        raise NotImplementedError

    def describe(self) -> pb.Operator:
        """The static description (what the optimizer chose)."""
        raise NotImplementedError

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        raise NotImplementedError

    def load_state(self, state: State) -> None:
        raise NotImplementedError

    def prepare(self, mu: Mapping) -> None:
        """After `load_state`: reposition the scans that will run first, so a
        resumed plan pays its seeks as resume time, not inside its quantum."""

    def variables(self) -> set[int]:
        """Slots this operator may bind."""
        raise NotImplementedError

    def sorted_on(self) -> int | None:
        """The slot whose ids ascend in this operator's output, if any."""
        return None


def save_mapping(out: list[int], mapping: Mapping | None, saver: TermSaver) -> None:
    """[n, v1..vn] with trailing unbound slots dropped; [-1] for none."""
    if mapping is None:
        out.append(-1)
        return
    values = saver.ids(mapping)
    out.append(len(values))
    out.extend(values)


def load_mapping(state: State, ctx: Context) -> Mapping | None:
    n = next(state)
    if n < 0:
        return None
    if n > ctx.width:
        raise ValueError("saved mapping is wider than the plan")
    restored = ctx.terms.restored
    return ctx.widen([restored(next(state)) for _ in range(n)])


def load_count(state: State, limit: int | None = None) -> int:
    """A non-negative saved count, at most `limit`."""
    value = next(state)
    if value < 0 or (limit is not None and value > limit):
        raise ValueError(f"saved position {value} out of range")
    return value
