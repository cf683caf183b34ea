"""A property path's closure (`p*`, `p+`, `p?`), evaluated on the workers from its bound end,
breadth first, each node reached once: the closures of *Processing SPARQL Property Path Queries
Online with Web Preemption*, run whole on the server with their visited nodes in the saved plan."""

from __future__ import annotations

from typing import cast

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec

REPEATS = ("*", "+", "?")  # by pb.Closure.Repeat


class Closure(Operator):
    """`subject path{repeat} object`: `forward` is one step of the path binding slot `to` under
    slot `from`, `backward` the same step planned to bind `from` under `to`. The ends are
    `id << 1` (a term) or `slot << 1 | 1`; one of them is bound when the closure runs (the
    planner puts it after what binds it: `requires`).

    State (native): the nodes reached in the order found, how many were expanded, and the
    running step's state (exec.rs `Closure`)."""

    __slots__ = ("backward", "forward", "object", "repeat", "source", "subject", "target")

    def __init__(
        self,
        ctx: Context,
        forward: Operator,
        backward: Operator,
        ends: tuple[int, int],
        subject: int,
        obj: int,
        repeat: str,
    ) -> None:
        super().__init__(ctx)
        self.forward, self.backward = forward, backward
        self.source, self.target = ends
        self.subject, self.object = subject, obj
        self.repeat = repeat

    def describe(self) -> pb.Operator:
        closure = pb.Closure(
            forward=self.forward.describe(),
            backward=self.backward.describe(),
            to=self.target,
            subject=self.subject,
            object=self.object,
            repeat=cast("pb.Closure.Repeat", REPEATS.index(self.repeat)),
        )
        setattr(closure, "from", self.source)  # a Python keyword
        return pb.Operator(closure=closure)

    def spec(self) -> Spec:
        def end(code: int) -> tuple[bool, int]:
            return (bool(code & 1), code >> 1)

        return (
            "closure",
            self.forward.spec(),
            self.backward.spec(),
            self.source,
            self.target,
            end(self.subject),
            end(self.object),
            self.repeat,
        )

    @classmethod
    def build(cls, msg: pb.Closure, ctx: Context) -> Closure:
        from quanta.engine.operators import build

        source = getattr(msg, "from")
        ends = [code >> 1 for code in (msg.subject, msg.object) if code & 1]
        if any(s >= ctx.width for s in (source, msg.to, *ends)) or msg.repeat >= len(REPEATS):
            raise ValueError("closure: an undeclared variable, or no such path operator")
        forward, backward = build(msg.forward, ctx), build(msg.backward, ctx)
        return cls(ctx, forward, backward, (source, msg.to), msg.subject, msg.object, REPEATS[msg.repeat])

    def variables(self) -> set[int]:
        return {code >> 1 for code in (self.subject, self.object) if code & 1}
