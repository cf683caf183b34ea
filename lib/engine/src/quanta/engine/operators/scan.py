"""Index scan of one triple pattern (Algorithm 3 of the SaGe paper).
State (native): the offset of the next index entry to read."""

from __future__ import annotations

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec


class Scan(Operator):
    """Each position of `pattern` is `id << 1` (constant) or `slot << 1 | 1` (variable).
    `objects`: the global ids [start, end) the object may take, when a FILTER bounds it
    (`quanta.engine.planning.ranges`); the scan then reads those objects' entries of the
    object index when its subject and object are free, and the pattern's otherwise."""

    __slots__ = ("objects", "pattern")

    def __init__(self, ctx: Context, pattern: tuple[int, int, int], objects: tuple[int, int] | None = None) -> None:
        super().__init__(ctx)
        self.pattern = pattern
        self.objects = objects

    def describe(self) -> pb.Operator:
        return pb.Operator(scan=self.describe_scan())

    def describe_scan(self) -> pb.Scan:
        s, p, o = self.pattern
        if self.objects is None:
            return pb.Scan(s=s, p=p, o=o)
        start, end = self.objects
        return pb.Scan(s=s, p=p, o=o, objects=pb.IdRange(start=start, end=end))

    def spec(self) -> Spec:
        return ("scan", self.pattern, self.objects)

    @classmethod
    def build(cls, msg: pb.Scan, ctx: Context) -> Scan:
        for code in (msg.s, msg.p, msg.o):
            if code & 1 and code >> 1 >= ctx.width:
                raise ValueError("scan refers to an undeclared variable")
        objects = (msg.objects.start, msg.objects.end) if msg.HasField("objects") else None
        return cls(ctx, (msg.s, msg.p, msg.o), objects)

    def variables(self) -> set[int]:
        return {code >> 1 for code in self.pattern if code & 1}

    def sorted_on(self) -> int | None:
        s, p, o = self.pattern
        if self.objects is not None:
            return None  # read in the object index's order
        if s & 1 and self.ctx.store.sorted_by_subject(0, 0 if p & 1 else p >> 1, 0 if o & 1 else o >> 1):
            return s >> 1
        return None
