"""Operators that send nothing: VALUES, UNION, projection, LIMIT/OFFSET, DISTINCT."""

from __future__ import annotations

import heapq
from collections.abc import AsyncGenerator
from contextlib import aclosing

from quanta.client.ops.base import Batch, Op, Pacer, Shape
from quanta.client.ops.spill import Partitions, RowFile, fewer_runs
from quanta.client.plan.context import QueryContext
from quanta.sparql.term_rows import Row


class Rows(Op):
    """Rows known when planning (slot -> term each): VALUES, the empty group
    ({} has one empty solution), or none (a graph the dataset lacks)."""

    def __init__(self, rows: list[dict[int, str]], shape: Shape, maybe: frozenset[int] = frozenset()) -> None:
        self.rows, self.shape = rows, shape
        self.maybe = maybe
        self.certain = frozenset(s for s in maybe if all(s in r for r in rows)) if rows else maybe

    def label(self) -> str:
        return f"Rows ({len(self.rows)})"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
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

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
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

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
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

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
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
    """Each row once, in the order of its first occurrence (DISTINCT keeps its
    input's order: ORDER BY is below it). Up to the memory budget, rows are
    remembered and passed on at once. Beyond it every row not remembered is
    new to memory but may repeat an earlier one beyond it: those rows go to
    partition files by hash with their position, each partition keeps the first
    occurrence of each row (`_first_seen`), and the survivors of all
    partitions are merged back by position at the end. (Every row passed on
    at once comes before every spilled one: memory fills in input order.)"""

    def __init__(self, child: Op) -> None:
        self.child = child
        self.maybe, self.certain = child.maybe, child.certain

    def children(self) -> list[Op]:
        return [self.child]

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        seen: set[Row] = set()
        limit = ctx.budgets.memory_rows
        spill: Partitions | None = None
        position = 0  # of the next spilled row
        async for batch in self.child.run(ctx):
            out: Batch = []
            for row in batch:
                if row in seen:
                    continue
                if len(seen) < limit:
                    seen.add(row)
                    out.append(row)
                else:
                    if spill is None:
                        spill = Partitions(ctx, "distinct", _row, 0)
                    spill.add((position, row))
                    position += 1
            await pacer.tick(len(batch))
            yield out
        if spill is None:
            return
        seen.clear()
        runs: list[RowFile] = []
        for part in spill.finish():
            runs += await _first_seen(ctx, part, 1, pacer)
        runs = await fewer_runs(ctx, runs, _position, pacer)
        out = []
        try:
            for _, row in heapq.merge(*runs, key=_position):
                out.append(row)
                await pacer.tick()
                if len(out) >= SPILLED_BATCH:
                    yield out
                    out = []
        finally:
            for run in runs:
                run.delete()
        yield out


SPILLED_BATCH = 4096


def _row(entry: tuple[int, Row]) -> Row:
    return entry[1]


def _position(entry: tuple[int, Row]) -> int:
    return entry[0]


async def _first_seen(ctx: QueryContext, rows: RowFile, depth: int, pacer: Pacer) -> list[RowFile]:
    """The first occurrence of each row of a partition of (position, row), as
    files each in position order: one for what memory could tell apart, and
    those of the partitions beyond it, one level deeper (deleted: `rows`)."""
    seen: set[Row] = set()
    limit = ctx.budgets.memory_rows
    kept = RowFile(ctx, "distinct-kept")
    spill: Partitions | None = None
    for entry in rows:
        row = entry[1]
        if row not in seen:
            if len(seen) < limit:
                seen.add(row)
                kept.add(entry)
            else:
                if spill is None:
                    spill = Partitions(ctx, "distinct", _row, depth)
                spill.add(entry)
        await pacer.tick()
    rows.delete()
    runs = [kept.finish()]
    if spill is not None:
        seen.clear()
        for part in spill.finish():
            runs += await _first_seen(ctx, part, depth + 1, pacer)
    return runs
