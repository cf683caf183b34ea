"""OFFSET/LIMIT. State (native): the counts still to skip and to emit."""

from __future__ import annotations

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec


class Slice(Operator):
    """Only at the root of a plan (never re-run for another input mapping)."""

    __slots__ = ("input", "limit", "offset")

    def __init__(self, ctx: Context, input: Operator, offset: int, limit: int | None) -> None:
        super().__init__(ctx)
        self.input = input
        self.offset, self.limit = offset, limit

    def describe(self) -> pb.Operator:
        msg = pb.Slice(input=self.input.describe(), offset=self.offset)
        if self.limit is not None:
            msg.limit = self.limit
        return pb.Operator(slice=msg)

    def spec(self) -> Spec:
        return ("slice", self.input.spec(), self.offset, self.limit)

    @classmethod
    def build(cls, msg: pb.Slice, ctx: Context) -> Slice:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.input, ctx), msg.offset, msg.limit if msg.HasField("limit") else None)

    def variables(self) -> set[int]:
        return self.input.variables()

    def sorted_on(self) -> int | None:
        return self.input.sorted_on()
