"""Joins of two client-side inputs: each side runs once (its own requests),
the right side is built, the left side probes it.

`mode`: "join" (⋈), "left" (OPTIONAL: a left row that matches nothing
comes out alone), "minus" (MINUS: a left row goes unless it is compatible
with a right row that shares a variable with it). Rows are hashed on the
slots both sides always bind; the other shared slots are checked for
compatibility. The right side is kept in memory up to the budget; beyond
it, with hash slots, both sides are partitioned to disk by their hash and
joined a partition at a time (a grace hash join), and without hash slots
the right side goes to one file read once per memory-sized block of left
rows (a block nested loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from contextlib import aclosing

from quanta.client.ops.base import Batch, Op, Pacer, compatible, merge
from quanta.client.ops.spill import MAX_DEPTH, Partitions, RowFile, split
from quanta.client.plan.context import QueryContext
from quanta.sparql.term_rows import Row

Key = tuple[str | None, ...]
CHUNK = 4096  # rows per batch handed on


class HashJoin(Op):
    def __init__(self, left: Op, right: Op, mode: str, keep: Callable[[Row], bool] | None = None) -> None:
        self.left, self.right, self.mode, self.keep = left, right, mode, keep
        shared = left.maybe & right.maybe
        self.keys = sorted(left.certain & right.certain & shared)
        self.check = sorted(shared - set(self.keys))
        self.shared = sorted(shared)
        if mode == "join":
            self.maybe, self.certain = left.maybe | right.maybe, left.certain | right.certain
        elif mode == "left":
            self.maybe, self.certain = left.maybe | right.maybe, left.certain
        else:
            self.maybe, self.certain = left.maybe, left.certain

    def children(self) -> list[Op]:
        return [self.left, self.right]

    def label(self) -> str:
        return f"HashJoin mode={self.mode} keys={self.keys} check={self.check}"

    def key(self, row: Row) -> Key:
        return tuple(row[s] for s in self.keys)

    def matches(self, left: Row, right: Row) -> Row | None:
        """The merged row when `left` and `right` match (for minus: `left` when they do)."""
        if not compatible(left, right, self.check):
            return None
        if self.mode == "minus":
            if self.keys or any(left[s] is not None and right[s] is not None for s in self.shared):
                return left
            return None
        row = merge(left, right)
        if self.keep is not None and not self.keep(row):
            return None
        return row

    def probe(self, left: Row, candidates: Iterable[Row]) -> tuple[Batch, bool]:
        """What one left row gives against candidate right rows, and whether it matched."""
        out: Batch = []
        matched = False
        for right in candidates:
            row = self.matches(left, right)
            if row is not None:
                matched = True
                if self.mode == "minus":
                    break
                out.append(row)
        if self.mode == "minus":
            return ([] if matched else [left]), matched
        if self.mode == "left" and not matched:
            out.append(left)
        return out, matched

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        # the left side's first batch (a page at most) comes while the right side is built:
        # two server pieces (two subqueries) take their quanta at once, not one after the other
        async with aclosing(_Prefetched(self.left.run(ctx))) as left:
            async for out in self._join(ctx, left):
                yield out

    async def _join(self, ctx: QueryContext, left: AsyncIterator[Batch]) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        limit = ctx.budgets.memory_rows
        table: dict[Key, list[Row]] = {}
        count = 0
        overflow: Partitions | RowFile | None = None
        async with aclosing(self.right.run(ctx)) as batches:
            async for batch in batches:
                for row in batch:
                    if overflow is not None:
                        overflow.add(row)
                        continue
                    table.setdefault(self.key(row), []).append(row)
                    count += 1
                    if count > limit:
                        overflow = self._spill(ctx, table)
                        table = {}
                await pacer.tick(len(batch))
        if overflow is None:
            async for batch in left:
                out: Batch = []
                for row in batch:
                    candidates = table.get(self.key(row), ())
                    out += self.probe(row, candidates)[0]
                    await pacer.tick(1 + len(candidates))
                    if len(out) >= CHUNK:  # a join's output is handed on in bounded batches
                        yield out
                        out = []
                yield out
        elif isinstance(overflow, Partitions):
            async for out in self._grace(ctx, overflow, left, pacer):
                yield out
        else:
            async for out in self._nested(ctx, overflow.finish(), left, pacer):
                yield out

    def _spill(self, ctx: QueryContext, table: dict[Key, list[Row]]) -> Partitions | RowFile:
        spill: Partitions | RowFile = Partitions(ctx, "join", self.key, 0) if self.keys else RowFile(ctx, "join-right")
        for rows in table.values():
            for row in rows:
                spill.add(row)
        return spill

    async def _grace(
        self, ctx: QueryContext, right: Partitions, batches: AsyncIterator[Batch], pacer: Pacer
    ) -> AsyncGenerator[Batch, None]:
        left = Partitions(ctx, "join-left", self.key, 0)
        async for batch in batches:
            for row in batch:
                left.add(row)
            await pacer.tick(len(batch))
        for r_file, l_file in zip(right.finish(), left.finish(), strict=True):
            async for out in self._partition(ctx, r_file, l_file, 1, pacer):
                yield out

    async def _partition(
        self, ctx: QueryContext, right: RowFile, left: RowFile, depth: int, pacer: Pacer
    ) -> AsyncGenerator[Batch, None]:
        """One pair of partitions: in memory if the right one fits, else split
        again, and past the last level (a key with more rows than the budget)
        read as a block nested loop."""
        if right.count > ctx.budgets.memory_rows:
            if depth >= MAX_DEPTH:
                async for batch in self._nested(ctx, right, left, pacer):
                    yield batch
                return
            rights = split(ctx, right, "join", self.key, depth)
            lefts = split(ctx, left, "join-left", self.key, depth)
            for r_file, l_file in zip(rights, lefts, strict=True):
                async for batch in self._partition(ctx, r_file, l_file, depth + 1, pacer):
                    yield batch
            return
        table: dict[Key, list[Row]] = {}
        for row in right:
            table.setdefault(self.key(row), []).append(row)
        right.delete()
        out: Batch = []
        for row in left:
            out += self.probe(row, table.get(self.key(row), ()))[0]
            if len(out) >= 4096:
                await pacer.tick(len(out))
                yield out
                out = []
        left.delete()
        yield out

    async def _nested(
        self, ctx: QueryContext, right: RowFile, left: AsyncIterator[Batch] | RowFile, pacer: Pacer
    ) -> AsyncGenerator[Batch, None]:
        """Every left row against every right row, `memory_rows` left rows at a time."""
        block: Batch = []
        batches = _batches(left, ctx) if isinstance(left, RowFile) else left
        async for batch in batches:
            block += batch
            if len(block) >= ctx.budgets.memory_rows:
                async for out in self._block(block, right, pacer):
                    yield out
                block = []
        async for out in self._block(block, right, pacer):
            yield out
        right.delete()
        if isinstance(left, RowFile):
            left.delete()

    async def _block(self, block: Batch, right: RowFile, pacer: Pacer) -> AsyncGenerator[Batch, None]:
        matched = [False] * len(block)
        out: Batch = []
        for r in right:
            await pacer.tick(len(block))
            for i, left in enumerate(block):
                row = self.matches(left, r)
                if row is not None:
                    matched[i] = True
                    if self.mode != "minus":
                        out.append(row)
            if len(out) >= 4096:
                await pacer.tick(len(out))
                yield out
                out = []
        if self.mode == "left":
            out += [left for i, left in enumerate(block) if not matched[i]]
        elif self.mode == "minus":
            out = [left for i, left in enumerate(block) if not matched[i]]
        yield out


async def _batches(rows: RowFile, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
    batch: Batch = []
    for row in rows:
        batch.append(row)
        if len(batch) >= ctx.budgets.memory_rows:
            yield batch
            batch = []
    yield batch


class _Prefetched:
    """An input's batches, the first asked for at once (in a task) and the rest when wanted."""

    def __init__(self, batches: AsyncGenerator[Batch, None]) -> None:
        self.batches = batches
        self.first: asyncio.Future[Batch | None] | None = asyncio.ensure_future(anext(batches, None))

    def __aiter__(self) -> _Prefetched:
        return self

    async def __anext__(self) -> Batch:
        if self.first is not None:
            first, self.first = self.first, None
            batch = await first
            if batch is None:
                raise StopAsyncIteration
            return batch
        return await anext(self.batches)

    async def aclose(self) -> None:
        if self.first is not None:  # never awaited (the right side failed, or the join was closed)
            self.first.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.first
            self.first = None
        await self.batches.aclose()
