"""Partial answers, which the client merges: a quantum's DISTINCT or GROUP BY with COUNT(*)
and MIN, MAX, SAMPLE or SUM of variables (`Tally`), and a quantum's ORDER BY ... LIMIT k (`TopK`).

Each quantum hands on what it found (lib/native/src/exec.rs): the distinct rows,
each once with how many times it came, or the first k rows in the query's order. A row
may come again in a later quantum (the client adds its counts), and a later quantum's
rows may come before an earlier one's (the client keeps the first k of all). Only at the
root of a plan compiled for partial answers (`compile_query(..., partial=True)`).

`exact` ones, anywhere in a plan run whole (`compile_query(..., whole=True)`), hand on the whole
input's groups or first k rows once it ended, or stop the plan unfinished (more than a plan run
whole holds); what they gathered is state, saved with the plan (format 6).
"""

from __future__ import annotations

from typing import cast

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec

REDUCTIONS = ("min", "max", "sample", "sum")  # by pb.Reduced.Kind


class Tally(Operator):
    __slots__ = ("count", "exact", "input", "reduced", "slots")

    def __init__(
        self,
        ctx: Context,
        input: Operator,
        slots: list[int],
        count: int | None,
        reduced: list[tuple[int, int, str]] | None = None,
        exact: bool = False,
    ) -> None:
        super().__init__(ctx)
        self.input = input
        self.slots = slots
        self.exact = exact
        self.count = count  # the slot a row's count is bound to; None: DISTINCT
        # (source slot, target slot, "min" | "max" | "sample" | "sum"): per distinct row of `slots`,
        # the least, greatest or first value of the source slot the quantum found, or the sum of its
        # integers, bound to the target
        self.reduced = reduced or []

    def describe(self) -> pb.Operator:
        reduced = [
            pb.Reduced(source=source, target=target, kind=cast("pb.Reduced.Kind", REDUCTIONS.index(how)))
            for source, target, how in self.reduced
        ]
        msg = pb.Tally(input=self.input.describe(), slots=self.slots, reduced=reduced, exact=self.exact)
        if self.count is not None:
            msg.count = self.count
        return pb.Operator(tally=msg)

    def spec(self) -> Spec:
        return ("tally", self.input.spec(), self.slots, self.count, self.reduced, self.exact)

    @classmethod
    def build(cls, msg: pb.Tally, ctx: Context) -> Tally:
        from quanta.engine.operators import build

        if any(r.kind >= len(REDUCTIONS) for r in msg.reduced):
            raise ValueError("tally: no such reduction")
        reduced = [(r.source, r.target, REDUCTIONS[r.kind]) for r in msg.reduced]
        count = msg.count if msg.HasField("count") else None
        return cls(ctx, build(msg.input, ctx), list(msg.slots), count, reduced, msg.exact)

    def variables(self) -> set[int]:
        counted = {self.count} if self.count is not None else set()
        return set(self.slots) | counted | {target for _, target, _ in self.reduced}


class TopK(Operator):
    __slots__ = ("exact", "input", "k", "keys")

    def __init__(
        self, ctx: Context, input: Operator, keys: list[tuple[int, bool]], k: int, exact: bool = False
    ) -> None:
        super().__init__(ctx)
        self.input = input
        self.keys = keys  # (slot, descending), in ORDER BY's order
        self.k = k
        self.exact = exact

    def describe(self) -> pb.Operator:
        keys = [pb.OrderKey(slot=slot, descending=descending) for slot, descending in self.keys]
        return pb.Operator(top_k=pb.TopK(input=self.input.describe(), keys=keys, k=self.k, exact=self.exact))

    def spec(self) -> Spec:
        return ("topk", self.input.spec(), self.keys, self.k, self.exact)

    @classmethod
    def build(cls, msg: pb.TopK, ctx: Context) -> TopK:
        from quanta.engine.operators import build

        if msg.k < 1:
            raise ValueError("a top-k of no row")
        keys = [(key.slot, key.descending) for key in msg.keys]
        return cls(ctx, build(msg.input, ctx), keys, msg.k, msg.exact)

    def variables(self) -> set[int]:
        return self.input.variables()
