"""Joins: index loop join (Algorithm 5 of the SaGe paper), its OPTIONAL, (NOT) EXISTS and MINUS,
and merge join (Algorithm 4)."""

from __future__ import annotations

from typing import cast

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


class SemiJoin(IndexJoin):
    """FILTER EXISTS, FILTER NOT EXISTS or MINUS (`kind`): for each mapping of `left`,
    `right` under the bindings of `slots` only; the mapping is handed on when `right`
    gives a row (EXISTS) or none (the others). EXISTS: `slots` are the variables of the
    pattern the filter is on (SPARQL's substitution of its solution). MINUS: the variables
    both sides share, which every row of `right` binds (the fragment admits no other), so
    a row of `right` under them is a compatible solution with a shared variable; a
    mapping binding none of them stays. Exact under any outer bindings.

    State (native): as LeftJoin's, with whether the current left mapping is decided."""

    __slots__ = ("kind", "slots")

    KINDS = {"exists": 0, "not_exists": 1, "minus": 2}  # pb.SemiJoin.Kind, by native spec tag

    def __init__(self, ctx: Context, left: Operator, right: Operator, kind: str, slots: list[int]) -> None:
        super().__init__(ctx, left, right)
        self.kind = kind
        self.slots = sorted(slots)

    def describe(self) -> pb.Operator:
        kind = cast("pb.SemiJoin.Kind", self.KINDS[self.kind])
        return pb.Operator(
            semi_join=pb.SemiJoin(left=self.left.describe(), right=self.right.describe(), kind=kind, slots=self.slots)
        )

    def spec(self) -> Spec:
        return (self.kind, self.left.spec(), self.right.spec(), self.slots)

    @classmethod
    def build(cls, msg: pb.SemiJoin, ctx: Context) -> SemiJoin:  # type: ignore[override]
        from quanta.engine.operators import build

        kind = next((k for k, v in cls.KINDS.items() if v == msg.kind), None)
        if kind is None or any(s >= ctx.width for s in msg.slots):
            raise ValueError("semi join: an unknown kind, or a slot of an undeclared variable")
        return cls(ctx, build(msg.left, ctx), build(msg.right, ctx), kind, list(msg.slots))

    def variables(self) -> set[int]:
        return self.left.variables()  # right's rows are never handed on


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


class HashJoin(Operator):
    """SPARQL's join of two inputs, each evaluated once (subqueries): `right` read whole into
    a table by its values of `keys` (slots both sides bind in every row), then each row of
    `left` with each compatible row of it. Only in a plan run whole; the rows read are state."""

    __slots__ = ("keys", "left", "right")

    def __init__(self, ctx: Context, left: Operator, right: Operator, keys: list[int]) -> None:
        super().__init__(ctx)
        self.left, self.right, self.keys = left, right, keys

    def describe(self) -> pb.Operator:
        msg = pb.HashJoin(left=self.left.describe(), right=self.right.describe(), keys=self.keys)
        return pb.Operator(hash_join=msg)

    @classmethod
    def build(cls, msg: pb.HashJoin, ctx: Context) -> HashJoin:
        from quanta.engine.operators import build

        if any(key >= ctx.width for key in msg.keys):
            raise ValueError("hash join key is an undeclared variable")
        return cls(ctx, build(msg.left, ctx), build(msg.right, ctx), list(msg.keys))

    def spec(self) -> Spec:
        return ("hashjoin", self.left.spec(), self.right.spec(), self.keys)

    def variables(self) -> set[int]:
        return self.left.variables() | self.right.variables()
