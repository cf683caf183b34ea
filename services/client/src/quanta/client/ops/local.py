"""Operators that send nothing: VALUES, UNION, projection, LIMIT/OFFSET, DISTINCT."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from itertools import islice

from quanta.client.ops.base import Batch, Op, Pacer, Row, Shape
from quanta.client.ops.spill import Partitions, RowFile
from quanta.client.plan.context import Context


class Rows(Op):
    """Rows known when planning (slot -> term each): VALUES, the empty group
    ({} has one empty solution), or none (a graph the dataset lacks)."""

    def __init__(self, rows: list[dict[int, str]], shape: Shape, maybe: frozenset[int] = frozenset()) -> None:
        self.rows, self.shape = rows, shape
        self.maybe = maybe
        self.certain = frozenset(s for s in maybe if all(s in r for r in rows)) if rows else maybe

    def label(self) -> str:
        return f"Rows ({len(self.rows)})"

    async def run(self, ctx: Context) -> AsyncGenerator[Batch, None]:
        width = self.shape.width
        yield [tuple(r.get(i) for i in range(width)) for r in self.rows]


class Union(Op):
    """Multiset union: each branch in turn."""

    def __init__(self, branches: list[Op]) -> None:
        self.branches = branches
        self.maybe = frozenset().union(*(b.maybe for b in branches))
        self.certain = frozenset.intersection(*(b.certain for b in branches))

    def children(self) -> list[Op]:
        return self.branches

    async def run(self, ctx: Context) -> AsyncGenerator[Batch, None]:
        for branch in self.branches:
            async with aclosing(branch.run(ctx)) as batches:
                async for batch in batches:
                    yield batch


class Project(Op):
    """Keeps `slots`; every other slot becomes unbound (a subquery's own
    variables are invisible outside it)."""

    def __init__(self, child: Op, slots: list[int], shape: Shape) -> None:
        self.child, self.slots, self.shape = child, slots, shape
        keep = set(slots)
        self.maybe, self.certain = child.maybe & keep, child.certain & keep

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"Project {self.slots}"

    async def run(self, ctx: Context) -> AsyncGenerator[Batch, None]:
        keep = set(self.slots)
        drop = [s for s in range(self.shape.width) if s not in keep]
        async for batch in self.child.run(ctx):
            out = []
            for row in batch:
                cells = list(row)
                for s in drop:
                    cells[s] = None
                out.append(tuple(cells))
            yield out


class Slice(Op):
    """OFFSET and LIMIT: stops reading its input (so no request is sent any
    more) as soon as it has `limit` rows."""

    def __init__(self, child: Op, offset: int, limit: int | None) -> None:
        self.child, self.offset, self.limit = child, offset, limit
        self.maybe, self.certain = child.maybe, child.certain

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"Slice offset={self.offset} limit={self.limit}"

    async def run(self, ctx: Context) -> AsyncGenerator[Batch, None]:
        skip, left = self.offset, self.limit
        if left == 0:
            return
        async with aclosing(self.child.run(ctx)) as batches:
            async for batch in batches:
                if skip:
                    taken = min(skip, len(batch))
                    skip -= taken
                    batch = batch[taken:]
                if left is not None:
                    batch = batch[:left]
                    left -= len(batch)
                if batch:
                    yield batch
                if left == 0:
                    return


class Distinct(Op):
    """Each row once. Up to the memory budget, rows are remembered and passed
    on at once; beyond it, unseen rows are partitioned to disk by hash and
    each partition is deduplicated at the end."""

    def __init__(self, child: Op) -> None:
        self.child = child
        self.maybe, self.certain = child.maybe, child.certain

    def children(self) -> list[Op]:
        return [self.child]

    async def run(self, ctx: Context) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        seen = _Seen(ctx, 0)
        async for batch in self.child.run(ctx):
            out = seen.new(batch)
            await pacer.tick(len(batch))
            yield out
        async for out in seen.spilled(pacer):
            yield out


class _Seen:
    """The rows seen so far, up to the memory budget; unseen rows beyond it go to
    partitions on disk (at `depth`), each deduplicated at the end, one level deeper."""

    def __init__(self, ctx: Context, depth: int) -> None:
        self.ctx, self.depth = ctx, depth
        self.rows: set[Row] = set()
        self.spill: Partitions | None = None

    def new(self, rows: Iterable[Row]) -> Batch:
        """The rows not seen before that memory holds (the others beyond the budget spilled)."""
        seen, limit, out = self.rows, self.ctx.budgets.memory_rows, []
        for row in rows:
            if row in seen:
                continue
            if len(seen) < limit:
                seen.add(row)
                out.append(row)
            else:
                if self.spill is None:
                    self.spill = Partitions(self.ctx, "distinct", lambda r: r, self.depth)
                self.spill.add(row)
        return out

    async def spilled(self, pacer: Pacer) -> AsyncGenerator[Batch, None]:
        """The spilled rows, each once: partition by partition, with the memory freed first."""
        if self.spill is None:
            return
        self.rows.clear()
        for part in self.spill.finish():
            async for out in _distinct_file(self.ctx, part, self.depth + 1, pacer):
                yield out


async def _distinct_file(ctx: Context, rows: RowFile, depth: int, pacer: Pacer) -> AsyncGenerator[Batch, None]:
    seen, unread = _Seen(ctx, depth), iter(rows)
    while chunk := list(islice(unread, 4096)):
        out = seen.new(chunk)
        await pacer.tick(len(chunk))
        yield out
    rows.delete()
    async for more in seen.spilled(pacer):
        yield more
