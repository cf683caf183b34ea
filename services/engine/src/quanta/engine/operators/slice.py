"""OFFSET/LIMIT with O(1) state: the counts still to skip and to emit."""

from __future__ import annotations

from collections.abc import Iterator

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State, load_count
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.term_table import Mapping, TermSaver


class Slice(Operator):
    """Only at the root of a plan (never re-run for another input mapping)."""

    __slots__ = ("input", "limit", "offset", "remaining", "skip")

    def __init__(self, ctx: Context, input: Operator, offset: int, limit: int | None) -> None:
        super().__init__(ctx)
        self.input = input
        self.offset, self.limit = offset, limit
        self.skip, self.remaining = offset, limit

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        if self.remaining == 0:
            return  # checked before pulling, so no input mapping is lost
        for m in self.input.iterate(mu):
            if self.skip:
                self.skip -= 1
                continue
            if self.remaining is not None:
                self.remaining -= 1
            yield m
            if self.remaining == 0:
                return

    def reset(self) -> None:
        raise AssertionError("a slice is never re-run")

    def describe(self) -> pb.Operator:
        msg = pb.Slice(input=self.input.describe(), offset=self.offset)
        if self.limit is not None:
            msg.limit = self.limit
        return pb.Operator(slice=msg)

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        out.append(self.skip)
        out.append(0 if self.remaining is None else self.remaining + 1)
        self.input.save_state(out, saver)

    def load_state(self, state: State) -> None:
        self.skip = load_count(state, self.offset)
        remaining = load_count(state, None if self.limit is None else self.limit + 1)
        self.remaining = None if self.limit is None else remaining - 1
        if self.remaining is not None and self.remaining < 0:
            raise ValueError("slice: no remaining count for a limit")
        self.input.load_state(state)

    def prepare(self, mu: Mapping) -> None:
        self.input.prepare(mu)

    @classmethod
    def build(cls, msg: pb.Slice, ctx: Context) -> Slice:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.input, ctx), msg.offset, msg.limit if msg.HasField("limit") else None)

    def variables(self) -> set[int]:
        return self.input.variables()

    def sorted_on(self) -> int | None:
        return self.input.sorted_on()
