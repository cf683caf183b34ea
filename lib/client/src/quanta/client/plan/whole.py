"""When to send a query whole first (`ops.remote.Whole`): learned per query shape from what the
workers answered.

A worker runs a query whole (suspending and resuming it like any query) or answers `unfinished`
when it cannot: a value it cannot order or add, more groups or rows than a plan run whole may
hold. The client then runs it in pieces, having spent what the worker read until it found out.
Whether a query can be run whole depends on the data, not on its text alone (a GROUP BY of
products has 10,000 groups at 10,000 products and 100,000 at 100,000), and the queries an
application sends repeat a few shapes with other constants. So each shape (the algebra with the
constants of triple patterns and expressions left out) keeps a count of its queries that came
back unfinished in a row: after k of them, the next 2^k - 1 queries of that shape (63 at most)
go in pieces at once, then one is tried whole again; one that finishes starts the count again.
A shape the workers cannot run whole costs that waste in 64 of its queries at most; one they can
is tried every time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from quanta.sparql.syntax import AlgebraNode, IriTerm, LiteralTerm

MAX_SKIPPED = 63
SHAPES = 4096  # shapes remembered, the least recently used forgotten first


class WholeTries:
    """Per query shape: whether its next query is sent whole first. One per client, its queries'
    outcomes reported as they come (`outcome`)."""

    def __init__(self) -> None:
        # shape -> (unfinished in a row, queries still to send in pieces at once)
        self.shapes: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()

    def worth_trying(self, shape: Hashable) -> bool:
        state = self.shapes.get(shape)
        if state is None:
            return True
        self.shapes.move_to_end(shape)
        unfinished, skip = state
        if skip > 0:
            self.shapes[shape] = (unfinished, skip - 1)
            return False
        return True

    def outcome(self, shape: Hashable, finished: bool) -> None:
        if finished:
            self.shapes.pop(shape, None)
            return
        unfinished = self.shapes.get(shape, (0, 0))[0] + 1
        self.shapes[shape] = (unfinished, min(2**unfinished - 1, MAX_SKIPPED))
        self.shapes.move_to_end(shape)
        if len(self.shapes) > SHAPES:
            self.shapes.popitem(last=False)


def shape(value: Any) -> Hashable:
    """A query's algebra without its constants: those of triple patterns' subjects and objects,
    and of expressions (a predicate, a function's IRI and the variables stay)."""
    if isinstance(value, AlgebraNode):
        return (value.name, *((key, _kept(key, v)) for key, v in value.items() if not key.startswith("_")))
    if isinstance(value, LiteralTerm | IriTerm):
        return "constant"
    if isinstance(value, list | tuple):
        return tuple(shape(v) for v in value)
    return value if isinstance(value, Hashable) else repr(value)


def _kept(key: str, value: Any) -> Hashable:
    if key == "triples":
        return tuple((shape(s), p if isinstance(p, IriTerm) else shape(p), shape(o)) for s, p, o in value)
    if key == "iri":
        return str(value)
    return shape(value)
