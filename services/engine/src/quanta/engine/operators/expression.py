"""Operators that evaluate an expression per mapping: FILTER and BIND.
Both are stateless beyond their input (the paper's FILTER)."""

from __future__ import annotations

from collections.abc import Iterator

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql import expressions
from quanta.sparql.term_table import Mapping, TermSaver


def _check_slots(expr: pb.Expr, ctx: Context) -> pb.Expr:
    if any(slot >= ctx.width for slot in expressions.variables(expr)):
        raise ValueError("expression refers to an undeclared variable")
    return expr


class Filter(Operator):
    __slots__ = ("condition", "input", "test")

    def __init__(self, ctx: Context, input: Operator, condition: pb.Expr) -> None:
        super().__init__(ctx)
        self.input = input
        self.condition = condition
        self.test = expressions.compile_test(condition, ctx.terms)

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        test = self.test
        for m in self.input.iterate(mu):
            if test(m):
                yield m

    def reset(self) -> None:
        self.input.reset()

    def describe(self) -> pb.Operator:
        return pb.Operator(filter=pb.Filter(input=self.input.describe(), condition=self.condition))

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        self.input.save_state(out, saver)

    def load_state(self, state: State) -> None:
        self.input.load_state(state)

    def prepare(self, mu: Mapping) -> None:
        self.input.prepare(mu)

    @classmethod
    def build(cls, msg: pb.Filter, ctx: Context) -> Filter:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.input, ctx), _check_slots(msg.condition, ctx))

    def variables(self) -> set[int]:
        return self.input.variables()

    def sorted_on(self) -> int | None:
        return self.input.sorted_on()


class Extend(Operator):
    """BIND(expression AS ?slot). An evaluation error leaves the slot unbound.
    When the slot is already bound (by an outer join's bindings) the mapping
    passes only if the values agree: that is the join's compatibility."""

    __slots__ = ("expression", "input", "slot", "value")

    def __init__(self, ctx: Context, input: Operator, slot: int, expression: pb.Expr) -> None:
        super().__init__(ctx)
        self.input = input
        self.slot = slot
        self.expression = expression
        self.value = expressions.compile_value(expression, ctx.terms)

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        value, slot = self.value, self.slot
        for m in self.input.iterate(mu):
            v = value(m)
            if not v:
                yield m
            elif not m[slot]:
                yield (*m[:slot], v, *m[slot + 1 :])
            elif m[slot] == v:
                yield m

    def reset(self) -> None:
        self.input.reset()

    def describe(self) -> pb.Operator:
        msg = pb.Extend(input=self.input.describe(), slot=self.slot, expression=self.expression)
        return pb.Operator(extend=msg)

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        self.input.save_state(out, saver)

    def load_state(self, state: State) -> None:
        self.input.load_state(state)

    def prepare(self, mu: Mapping) -> None:
        self.input.prepare(mu)

    @classmethod
    def build(cls, msg: pb.Extend, ctx: Context) -> Extend:
        from quanta.engine.operators import build

        if msg.slot >= ctx.width:
            raise ValueError("BIND target is an undeclared variable")
        return cls(ctx, build(msg.input, ctx), msg.slot, _check_slots(msg.expression, ctx))

    def variables(self) -> set[int]:
        return self.input.variables() | {self.slot}

    def sorted_on(self) -> int | None:
        return self.input.sorted_on()
