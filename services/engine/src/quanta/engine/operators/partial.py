"""Partial answers, which the client merges: a quantum's DISTINCT or GROUP BY with COUNT(*)
(`Tally`), and a quantum's ORDER BY ... LIMIT k (`TopK`).

Each quantum hands on what it found (services/native/src/exec.rs): the distinct rows,
each once with how many times it came, or the first k rows in the query's order. A row
may come again in a later quantum (the client adds its counts), and a later quantum's
rows may come before an earlier one's (the client keeps the first k of all). Only at the
root of a plan compiled for partial answers (`compile_query(..., partial=True)`).
"""

from __future__ import annotations

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec


class Tally(Operator):
    __slots__ = ("count", "input", "slots")

    def __init__(self, ctx: Context, input: Operator, slots: list[int], count: int | None) -> None:
        super().__init__(ctx)
        self.input = input
        self.slots = slots
        self.count = count  # the slot a row's count is bound to; None: DISTINCT

    def describe(self) -> pb.Operator:
        msg = pb.Tally(input=self.input.describe(), slots=self.slots)
        if self.count is not None:
            msg.count = self.count
        return pb.Operator(tally=msg)

    def spec(self) -> Spec:
        return ("tally", self.input.spec(), self.slots, self.count)

    @classmethod
    def build(cls, msg: pb.Tally, ctx: Context) -> Tally:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.input, ctx), list(msg.slots), msg.count if msg.HasField("count") else None)

    def variables(self) -> set[int]:
        return set(self.slots) | ({self.count} if self.count is not None else set())


class TopK(Operator):
    __slots__ = ("input", "k", "keys")

    def __init__(self, ctx: Context, input: Operator, keys: list[tuple[int, bool]], k: int) -> None:
        super().__init__(ctx)
        self.input = input
        self.keys = keys  # (slot, descending), in ORDER BY's order
        self.k = k

    def describe(self) -> pb.Operator:
        keys = [pb.OrderKey(slot=slot, descending=descending) for slot, descending in self.keys]
        return pb.Operator(top_k=pb.TopK(input=self.input.describe(), keys=keys, k=self.k))

    def spec(self) -> Spec:
        return ("topk", self.input.spec(), self.keys, self.k)

    @classmethod
    def build(cls, msg: pb.TopK, ctx: Context) -> TopK:
        from quanta.engine.operators import build

        if msg.k < 1:
            raise ValueError("a top-k of no row")
        return cls(ctx, build(msg.input, ctx), [(key.slot, key.descending) for key in msg.keys], msg.k)

    def variables(self) -> set[int]:
        return self.input.variables()
