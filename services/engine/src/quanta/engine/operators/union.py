"""Multiset UNION: branches run one after the other; no state of its own
beyond which branch is running."""

from __future__ import annotations

from collections.abc import Iterator

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State, load_count
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.term_table import Mapping, TermSaver


class Union(Operator):
    __slots__ = ("active", "branches")

    def __init__(self, ctx: Context, branches: list[Operator]) -> None:
        super().__init__(ctx)
        self.branches = branches
        self.active = 0

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        while self.active < len(self.branches):
            yield from self.branches[self.active].iterate(mu)
            self.active += 1

    def reset(self) -> None:
        for branch in self.branches:
            branch.reset()
        self.active = 0

    def describe(self) -> pb.Operator:
        return pb.Operator(union=pb.Union(branches=[b.describe() for b in self.branches]))

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        out.append(self.active)
        for branch in self.branches:
            branch.save_state(out, saver)

    def load_state(self, state: State) -> None:
        self.active = load_count(state, len(self.branches))
        for branch in self.branches:
            branch.load_state(state)

    def prepare(self, mu: Mapping) -> None:
        if self.active < len(self.branches):
            self.branches[self.active].prepare(mu)

    @classmethod
    def build(cls, msg: pb.Union, ctx: Context) -> Union:
        from quanta.engine.operators import build

        return cls(ctx, [build(b, ctx) for b in msg.branches])

    def variables(self) -> set[int]:
        return set().union(*(b.variables() for b in self.branches))
