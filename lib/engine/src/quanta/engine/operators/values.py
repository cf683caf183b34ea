"""Inline data (VALUES): rows of term ids, produced in order. A row joins the
input mapping when every cell is UNDEF (0), unbound in the input, or equal to
it. State (native): how many rows were read."""

from __future__ import annotations

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec


class Values(Operator):
    __slots__ = ("rows", "slots")

    def __init__(self, ctx: Context, slots: list[int], rows: list[tuple[int, ...]]) -> None:
        super().__init__(ctx)
        self.slots = slots
        self.rows = rows

    def describe(self) -> pb.Operator:
        cells = [v for row in self.rows for v in row]
        return pb.Operator(values=pb.Values(slots=self.slots, cells=cells, rows=len(self.rows)))

    def spec(self) -> Spec:
        return ("values", self.slots, [v for row in self.rows for v in row], len(self.rows))

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
