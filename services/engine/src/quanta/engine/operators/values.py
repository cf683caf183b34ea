"""Inline data (VALUES): rows of term ids, produced in order."""

from __future__ import annotations

from collections.abc import Iterator

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State, load_count
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.term_table import Mapping, TermSaver


class Values(Operator):
    """State: how many rows were produced. A row joins the input mapping
    when every cell is UNDEF (0), unbound in the input, or equal to it."""

    __slots__ = ("position", "rows", "slots")

    def __init__(self, ctx: Context, slots: list[int], rows: list[tuple[int, ...]]) -> None:
        super().__init__(ctx)
        self.slots = slots
        self.rows = rows
        self.position = 0

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        quantum = self.ctx.quantum
        slots = self.slots
        while self.position < len(self.rows):
            quantum.budget -= 1
            if quantum.budget < 0:
                quantum.check()
            row = self.rows[self.position]
            self.position += 1
            out = list(mu)
            for slot, value in zip(slots, row, strict=True):
                if value:
                    if out[slot] and out[slot] != value:
                        break
                    out[slot] = value
            else:
                yield tuple(out)

    def reset(self) -> None:
        self.position = 0

    def describe(self) -> pb.Operator:
        cells = [v for row in self.rows for v in row]
        return pb.Operator(values=pb.Values(slots=self.slots, cells=cells, rows=len(self.rows)))

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        out.append(self.position)

    def load_state(self, state: State) -> None:
        self.position = load_count(state, len(self.rows))

    @classmethod
    def build(cls, msg: pb.Values, ctx: Context) -> Values:
        width = len(msg.slots)
        if len(msg.cells) != width * msg.rows or any(s >= ctx.width for s in msg.slots):
            raise ValueError("values: malformed rows")
        cells = list(msg.cells)
        rows = [tuple(cells[i * width : (i + 1) * width]) for i in range(msg.rows)]
        return cls(ctx, list(msg.slots), rows)

    def variables(self) -> set[int]:
        return set(self.slots)
