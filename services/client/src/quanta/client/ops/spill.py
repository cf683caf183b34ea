"""Rows on disk: what the operators that need all of their input keep beyond
their memory budget (files in the query's temporary directory, removed
when the query ends or is closed; their total is bounded by the disk budget).

- `RowFile`: rows appended in pickled batches, read back in order.
- `ExternalSort`: sorted runs of `memory_rows` rows, merged (a database's
  sort buffer and external merge sort).
- `Partitions`: rows split by a hash of their key into files small enough
  to be handled one at a time (hash partitioning, as a grace hash join).
"""

from __future__ import annotations

import heapq
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from quanta.client.ops.base import Row
from quanta.client.plan.context import Context
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind

CHUNK = 4096  # rows per pickled batch
FANOUT = 16  # partitions per level
MAX_DEPTH = 6  # levels of partitioning before giving up (a key with too many rows)


class RowFile:
    def __init__(self, ctx: Context, kind: str) -> None:
        self.ctx = ctx
        self.path = ctx.temp_dir() / f"{kind}-{ctx.next_file()}.rows"
        self.out: Any = open(self.path, "wb")  # noqa: SIM115 (closed by finish, or with the directory)
        self.pending: list[Any] = []
        self.count = 0

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
            self.out.write(data)
            self.pending = []

    def finish(self) -> RowFile:
        if self.out is not None:
            self._flush()
            self.out.close()
            self.out = None
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
        self.finish()
        if self.path.exists():
            os.unlink(self.path)


class ExternalSort:
    """Rows sorted by `key`, holding at most `limit` in memory."""

    def __init__(self, ctx: Context, key: Callable[[Any], Any], limit: int) -> None:
        self.ctx, self.key, self.limit = ctx, key, max(1, limit)
        self.buffer: list[Any] = []
        self.runs: list[RowFile] = []

    def add(self, row: Any) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.limit:
            self._spill()

    def _spill(self) -> None:
        self.buffer.sort(key=self.key)
        run = RowFile(self.ctx, "sort-run")
        run.extend(self.buffer)
        self.runs.append(run.finish())
        self.buffer = []

    def add_all(self, rows: Iterable[Any]) -> None:
        for row in rows:
            self.add(row)

    def finish(self) -> None:
        """Sort what is still in memory (the long part of `sorted`'s start)."""
        if self.runs and self.buffer:
            self._spill()
        else:
            self.buffer.sort(key=self.key)

    @property
    def spilled(self) -> bool:
        return bool(self.runs)

    def sorted(self) -> Iterator[Any]:
        """The rows in order (after `finish`)."""
        if not self.runs:
            yield from self.buffer
            return
        try:
            yield from heapq.merge(*self.runs, key=self.key)
        finally:
            for run in self.runs:
                run.delete()


class Partitions:
    """Rows by a hash of their key, into FANOUT files; each `depth` uses other
    bits of the hash, so that a partition split again spreads its keys."""

    def __init__(self, ctx: Context, kind: str, key: Callable[[Any], Any], depth: int) -> None:
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


def split(ctx: Context, rows: RowFile, kind: str, key: Callable[[Any], Any], depth: int) -> list[RowFile]:
    """A partition too large for memory, partitioned again (deleted)."""
    parts = Partitions(ctx, kind, key, depth)
    for row in rows:
        parts.add(row)
    rows.delete()
    return parts.finish()


def oversized(ctx: Context, what: str) -> QueryError:
    return QueryError(
        ErrorKind.BUDGET_EXCEEDED, f"{what} needs more than the memory budget of {ctx.budgets.memory_rows} rows"
    )


__all__ = ["ExternalSort", "Partitions", "Row", "RowFile", "oversized", "split"]
