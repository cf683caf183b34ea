"""Preemptable joins: index loop join (Algorithm 5) and merge join (Algorithm 4)."""

from __future__ import annotations

from collections.abc import Iterator

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State, load_count, load_mapping, save_mapping
from quanta.engine.operators.scan import Scan, binder
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.term_table import Mapping, TermSaver


class IndexJoin(Operator):
    """For each mapping of `left`, runs `right` under that mapping's bindings.

    State: the left mapping `right` is running for, then the left input's and
    `right`'s own. The planner only puts under `right` operators for which
    running under the bindings equals joining afterwards (see planner)."""

    __slots__ = ("current", "left", "right")

    def __init__(self, ctx: Context, left: Operator, right: Operator) -> None:
        super().__init__(ctx)
        self.left = left
        self.right = right
        self.current: Mapping | None = None

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        right = self.right
        if self.current is not None:  # resumed inside a right run
            yield from right.iterate(self.current)
        for outer in self.left.iterate(mu):
            self.current = outer
            right.reset()
            yield from right.iterate(outer)
        self.current = None

    def reset(self) -> None:
        self.left.reset()
        self.right.reset()
        self.current = None

    def describe(self) -> pb.Operator:
        return pb.Operator(index_join=pb.IndexJoin(left=self.left.describe(), right=self.right.describe()))

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        save_mapping(out, self.current, saver)
        self.left.save_state(out, saver)
        self.right.save_state(out, saver)

    def load_state(self, state: State) -> None:
        self.current = load_mapping(state, self.ctx)
        self.left.load_state(state)
        self.right.load_state(state)

    def prepare(self, mu: Mapping) -> None:
        if self.current is not None:
            self.right.prepare(self.current)
        self.left.prepare(mu)

    @classmethod
    def build(cls, msg: pb.IndexJoin, ctx: Context) -> IndexJoin:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.left, ctx), build(msg.right, ctx))

    def variables(self) -> set[int]:
        return self.left.variables() | self.right.variables()

    def sorted_on(self) -> int | None:
        return self.left.sorted_on()  # output follows the left order


class MergeJoin(Operator):
    """Joins a left input sorted on subject variable `key` with a scan of
    `?key p o` (also sorted on the subject), reading each input once.

    The right scan's offset marks the start of the current key group; the
    group is buffered while it is joined (duplicate left keys reuse it).
    State: the left mapping being joined and how many rows of the group it
    has been joined with, the right group's start, then the left's state.
    The planner only picks shapes whose scans jump to an offset in constant
    time, so resuming stays cheap."""

    __slots__ = ("current", "group_position", "key", "left", "right")

    def __init__(self, ctx: Context, left: Operator, right: Scan, key: int) -> None:
        super().__init__(ctx)
        self.left = left
        self.right = right
        self.key = key
        self.current: Mapping | None = None
        self.group_position = 0

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        ctx, right, key = self.ctx, self.right, self.key
        quantum = ctx.quantum
        (s, p, o), free = right.resolve(ctx.widen(()))
        bind = binder(ctx.width, tuple(f for f in free if f[0] != key))
        entries = ctx.store.search(s, p, o, right.offset)
        group: list[tuple[int, int, int]] = []
        group_key = 0
        lookahead = next(entries, None)

        def next_group() -> bool:
            """Move to the next key group; False when the right input is done."""
            nonlocal group_key, lookahead
            right.offset += len(group)
            group.clear()
            if lookahead is None:
                return False
            group_key = lookahead[0]
            while lookahead is not None and lookahead[0] == group_key:
                quantum.budget -= 1
                if quantum.budget < 0:
                    quantum.check()
                group.append(lookahead)
                lookahead = next(entries, None)
            return True

        if not next_group():
            return
        pending = self.current  # set when resumed in the middle of a left mapping
        outers = self.left.iterate(mu)
        while True:
            if pending is None:
                pending = next(outers, None)
                if pending is None:
                    break
                # recorded before the groups move, so a suspension there keeps it
                self.current, self.group_position = pending, 0
            wanted = pending[key]
            while group_key < wanted:
                if not next_group():
                    self.current = None
                    return
            if group_key == wanted:
                while self.group_position < len(group):
                    row = group[self.group_position]
                    self.group_position += 1
                    yield bind(pending, row)  # type: ignore[misc]
            pending = None
        self.current = None

    def reset(self) -> None:
        self.left.reset()
        self.right.reset()
        self.current = None
        self.group_position = 0

    def describe(self) -> pb.Operator:
        msg = pb.MergeJoin(left=self.left.describe(), right=self.right.describe_scan(), key=self.key)
        return pb.Operator(merge_join=msg)

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        save_mapping(out, self.current, saver)
        out.append(self.group_position)
        out.append(self.right.offset)
        self.left.save_state(out, saver)

    def load_state(self, state: State) -> None:
        self.current = load_mapping(state, self.ctx)
        self.group_position = load_count(state)
        self.right.offset = load_count(state)
        self.left.load_state(state)

    def prepare(self, mu: Mapping) -> None:
        self.left.prepare(mu)  # the right side jumps to its group in constant time

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
