"""Multiset UNION: branches run one after the other. State (native): which
branch is running, then each branch's."""

from __future__ import annotations

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec


class Union(Operator):
    __slots__ = ("branches",)

    def __init__(self, ctx: Context, branches: list[Operator]) -> None:
        super().__init__(ctx)
        self.branches = branches

    def describe(self) -> pb.Operator:
        return pb.Operator(union=pb.Union(branches=[b.describe() for b in self.branches]))

    def spec(self) -> Spec:
        return ("union", [b.spec() for b in self.branches])

    @classmethod
    def build(cls, msg: pb.Union, ctx: Context) -> Union:
        from quanta.engine.operators import build

        return cls(ctx, [build(b, ctx) for b in msg.branches])

    def variables(self) -> set[int]:
        return set().union(*(b.variables() for b in self.branches))
