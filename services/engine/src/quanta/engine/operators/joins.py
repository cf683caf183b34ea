"""Joins: index loop join (Algorithm 5 of the SaGe paper), its OPTIONAL, and merge join (Algorithm 4)."""

from __future__ import annotations

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec
from quanta.engine.operators.scan import Scan


class IndexJoin(Operator):
    """For each mapping of `left`, runs `right` under that mapping's bindings.

    State (native): the left mapping `right` is running for, then the left
    input's and `right`'s own. The planner only puts under `right` operators
    for which running under the bindings equals joining afterwards (see planner)."""

    __slots__ = ("left", "right")

    def __init__(self, ctx: Context, left: Operator, right: Operator) -> None:
        super().__init__(ctx)
        self.left = left
        self.right = right

    def describe(self) -> pb.Operator:
        return pb.Operator(index_join=pb.IndexJoin(left=self.left.describe(), right=self.right.describe()))

    def spec(self) -> Spec:
        return ("join", self.left.spec(), self.right.spec())

    @classmethod
    def build(cls, msg: pb.IndexJoin, ctx: Context) -> IndexJoin:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.left, ctx), build(msg.right, ctx))

    def variables(self) -> set[int]:
        return self.left.variables() | self.right.variables()

    def sorted_on(self) -> int | None:
        return self.left.sorted_on()  # output follows the left order


class LeftJoin(IndexJoin):
    """OPTIONAL: for each mapping of `left`, `right` under the bindings of the variables
    `left` may bind, the others checked afterwards; a mapping `right` gives no row for
    comes alone. Exact under any outer bindings, so the planner may put it anywhere.

    State (native): as IndexJoin's, with whether `right` gave a row for the current
    left mapping."""

    __slots__ = ()

    def describe(self) -> pb.Operator:
        return pb.Operator(left_join=pb.LeftJoin(left=self.left.describe(), right=self.right.describe()))

    def spec(self) -> Spec:
        return ("optional", self.left.spec(), self.right.spec(), sorted(self.left.variables()))

    @classmethod
    def build(cls, msg: pb.LeftJoin, ctx: Context) -> LeftJoin:  # type: ignore[override]
        from quanta.engine.operators import build

        return cls(ctx, build(msg.left, ctx), build(msg.right, ctx))


class MergeJoin(Operator):
    """Joins a left input sorted on subject variable `key` with a scan of
    `?key p o` (also sorted on the subject), reading each input once.

    The right scan's offset marks the start of the current key group; the
    group is buffered while it is joined (duplicate left keys reuse it).
    State (native): the left mapping being joined and how many rows of the
    group it has been joined with, the right group's start, then the left's
    state. The planner only picks shapes whose scans jump to an offset in
    constant time, so resuming stays cheap."""

    __slots__ = ("key", "left", "right")

    def __init__(self, ctx: Context, left: Operator, right: Scan, key: int) -> None:
        super().__init__(ctx)
        self.left = left
        self.right = right
        self.key = key

    def describe(self) -> pb.Operator:
        msg = pb.MergeJoin(left=self.left.describe(), right=self.right.describe_scan(), key=self.key)
        return pb.Operator(merge_join=msg)

    def spec(self) -> Spec:
        return ("merge", self.left.spec(), self.right.pattern, self.key)

    @classmethod
    def build(cls, msg: pb.MergeJoin, ctx: Context) -> MergeJoin:
        from quanta.engine.operators import build

        if msg.key >= ctx.width:
            raise ValueError("merge join key is an undeclared variable")
        return cls(ctx, build(msg.left, ctx), Scan.build(msg.right, ctx), msg.key)

    def variables(self) -> set[int]:
        return self.left.variables() | self.right.variables()

    def sorted_on(self) -> int | None:
        return self.key
