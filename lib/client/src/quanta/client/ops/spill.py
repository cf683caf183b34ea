"""Rows on disk: what the operators that need all of their input keep beyond
their memory budget (files in the query's temporary directory, removed
when the query ends or is closed; their total is bounded by the disk budget).

- `RowFile`: rows appended in pickled batches, read back in order.
- `SortedChunks`: items sorted in memory a chunk at a time, merged lazily.
- `ExternalSort`: sorted runs of `memory_rows` items, merged (a database's
  sort buffer and external merge sort).
- `Partitions`: rows split by a hash of their key into files small enough
  to be handled one at a time (hash partitioning, as a grace hash join).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from quanta.client.ops.base import Pacer
from quanta.client.plan.context import QueryContext, disk_error
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind
from quanta.sparql.term_rows import Row

CHUNK = 4096  # rows per pickled batch
FANOUT = 16  # partitions per level
MAX_DEPTH = 6  # levels of partitioning before giving up (a key with too many rows)
SORT_CHUNK = 2048  # rows sorted in one call (a few milliseconds)
FAN_IN = 32  # sorted runs merged at once


class RowFile:
    def __init__(self, ctx: QueryContext, kind: str) -> None:
        self.ctx = ctx
        self.path = ctx.temp_dir() / f"{kind}-{ctx.next_file()}.rows"
        try:
            self.out: Any = open(self.path, "wb")  # noqa: SIM115 (closed by finish, or with the directory)
        except OSError as error:
            raise disk_error(error) from error
        self.pending: list[Any] = []
        self.count = 0
        self.bytes = 0  # taken from the query's budgets (given back by `delete`)

    def add(self, row: Any) -> None:
        self.pending.append(row)
        self.count += 1
        if len(self.pending) >= CHUNK:
            self._flush()

    def extend(self, rows: Iterable[Any]) -> None:
        for row in rows:
            self.add(row)

    def _flush(self) -> None:
        if self.pending:
            data = pickle.dumps(self.pending, protocol=pickle.HIGHEST_PROTOCOL)
            self.ctx.spilled(len(data))
            self.bytes += len(data)
            self.pending = []
            try:
                self.out.write(data)
            except OSError as error:
                raise disk_error(error) from error

    def finish(self) -> RowFile:
        if self.out is not None:
            out = self.out
            try:
                self._flush()
                out.flush()  # a full disk shows here at the latest, not as a short file read later
            except OSError as error:
                raise disk_error(error) from error
            finally:
                self.out = None
                with contextlib.suppress(OSError):  # what failed above is reported; the file goes anyway
                    out.close()
        return self

    def __iter__(self) -> Iterator[Any]:
        self.finish()
        with open(self.path, "rb") as f:
            while True:
                try:
                    chunk = pickle.load(f)
                except EOFError:
                    return
                yield from chunk

    def delete(self) -> None:
        self.pending = []  # never written: nothing to keep
        with contextlib.suppress(QueryError):  # the file goes whatever its last write did
            self.finish()
        if self.path.exists():
            os.unlink(self.path)
        self.ctx.unspilled(self.bytes)
        self.bytes = 0


class SortedChunks:
    """Items in memory (rows decorated with their sort key: they compare as they are),
    sorted a chunk of SORT_CHUNK at a time and merged lazily: no single sort call holds
    the event loop (or the GIL, which a sort in a thread would hold as long) for more
    than a few milliseconds."""

    def __init__(self) -> None:
        self.chunks: list[list[Any]] = []
        self.pending: list[Any] = []
        self.count = 0

    async def add(self, rows: Iterable[Any], pacer: Pacer) -> None:
        self.pending.extend(rows)
        while len(self.pending) >= SORT_CHUNK:
            chunk, self.pending = self.pending[:SORT_CHUNK], self.pending[SORT_CHUNK:]
            await self._sort(chunk, pacer)

    async def _sort(self, chunk: list[Any], pacer: Pacer) -> None:
        chunk.sort()
        self.chunks.append(chunk)
        self.count += len(chunk)
        await pacer.tick(len(chunk))

    async def close(self, pacer: Pacer) -> None:
        """Sort what is still pending (then `merged` gives every row)."""
        if self.pending:
            chunk, self.pending = self.pending, []
            await self._sort(chunk, pacer)

    def __len__(self) -> int:
        return self.count + len(self.pending)

    def merged(self) -> Iterator[Any]:
        """The rows in order (after `close`); ties keep the order they were added in."""
        if len(self.chunks) == 1:
            return iter(self.chunks[0])
        return heapq.merge(*self.chunks)

    async def first(self, count: int, pacer: Pacer) -> None:
        """Keep only the first `count` rows (top-k)."""
        await self.close(pacer)
        kept = await take(self.merged(), count, pacer)
        self.chunks, self.count = [kept], len(kept)


async def take(rows: Iterator[Any], count: int | None, pacer: Pacer) -> list[Any]:
    """Up to `count` rows (None: all) of `rows`, handing the loop back as it goes."""
    out: list[Any] = []
    for row in rows:
        out.append(row)
        await pacer.tick()
        if count is not None and len(out) >= count:
            break
    return out


async def write(ctx: QueryContext, rows: Iterator[Any], kind: str, pacer: Pacer) -> RowFile:
    """`rows` into a new file."""
    out = RowFile(ctx, kind)
    for row in rows:
        out.add(row)
        await pacer.tick()
    return out.finish()


async def fewer_runs(
    ctx: QueryContext, runs: list[RowFile], key: Callable[[Any], Any] | None, pacer: Pacer
) -> list[RowFile]:
    """Runs sorted by `key` (None: items compared as they are), merged FAN_IN at a time
    until FAN_IN at most are left (the files a final merge opens at once stay bounded).
    Consecutive runs are merged, so a merge of the result keeps equal keys in the order of
    the runs (heapq.merge is stable)."""
    while len(runs) > FAN_IN:
        merged: list[RowFile] = []
        for start in range(0, len(runs), FAN_IN):
            group = runs[start : start + FAN_IN]
            merged.append(await write(ctx, heapq.merge(*group, key=key), "merged-run", pacer))
            for run in group:
                run.delete()
        runs = merged
    return runs


class ExternalSort:
    """Items (rows decorated with their sort key) in order, holding at most `limit` in
    memory: sorted runs on disk beyond it, merged FAN_IN at a time (a database's external
    merge sort: the files open at once stay bounded whatever the number of runs)."""

    def __init__(self, ctx: QueryContext, limit: int, pacer: Pacer) -> None:
        self.ctx, self.limit, self.pacer = ctx, max(1, limit), pacer
        self.memory = SortedChunks()
        self.runs: list[RowFile] = []

    async def add(self, rows: Iterable[Any]) -> None:
        await self.memory.add(rows, self.pacer)
        if len(self.memory) >= self.limit:
            await self._spill()

    async def _spill(self) -> None:
        await self.memory.close(self.pacer)
        self.runs.append(await self._write(self.memory.merged(), "sort-run"))
        self.memory = SortedChunks()

    async def _write(self, rows: Iterator[Any], kind: str) -> RowFile:
        return await write(self.ctx, rows, kind, self.pacer)

    async def finish(self) -> None:
        """Sort what is still in memory; spilled, merge runs until FAN_IN are left."""
        if self.runs and len(self.memory):
            await self._spill()
        else:
            await self.memory.close(self.pacer)
        self.runs = await fewer_runs(self.ctx, self.runs, None, self.pacer)

    @property
    def spilled(self) -> bool:
        return bool(self.runs)

    def sorted(self) -> Iterator[Any]:
        """The rows in order (after `finish`)."""
        if not self.runs:
            yield from self.memory.merged()
            return
        try:
            yield from heapq.merge(*self.runs)
        finally:
            for run in self.runs:
                run.delete()


class Partitions:
    """Rows by a hash of their key, into FANOUT files; each `depth` uses other
    bits of the hash, so that a partition split again spreads its keys."""

    def __init__(self, ctx: QueryContext, kind: str, key: Callable[[Any], Any], depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise QueryError(
                ErrorKind.BUDGET_EXCEEDED,
                f"{kind}: more rows share one key than the memory budget of {ctx.budgets.memory_rows} rows holds",
            )
        self.key, self.depth = key, depth
        self.files = [RowFile(ctx, f"{kind}-p{depth}") for _ in range(FANOUT)]

    def add(self, row: Any) -> None:
        self.files[(hash(self.key(row)) >> (4 * self.depth)) % FANOUT].add(row)

    def finish(self) -> list[RowFile]:
        return [f.finish() for f in self.files]


def split(ctx: QueryContext, rows: RowFile, kind: str, key: Callable[[Any], Any], depth: int) -> list[RowFile]:
    """A partition too large for memory, partitioned again (deleted)."""
    parts = Partitions(ctx, kind, key, depth)
    for row in rows:
        parts.add(row)
    rows.delete()
    return parts.finish()


def oversized(ctx: QueryContext, what: str) -> QueryError:
    return QueryError(
        ErrorKind.BUDGET_EXCEEDED, f"{what} needs more than the memory budget of {ctx.budgets.memory_rows} rows"
    )


__all__ = ["ExternalSort", "Partitions", "Row", "RowFile", "SortedChunks", "oversized", "split", "take"]
