"""What one query may use on the client: memory, disk, and the size of shipped blocks;
and what all the queries of a process may hold on disk together (`DiskPool`)."""

from __future__ import annotations

from dataclasses import dataclass, field


class DiskPool:
    """Bytes of temporary files that all the queries sharing it may hold at once
    (the gateway's process-wide spill budget). Bytes are taken before they are
    written and given back when their file is removed, so a query that would
    pass the limit is refused rather than filling the disk for everyone."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        """Reserve `size` bytes; False (nothing reserved) if that would pass the limit."""
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used = max(0, self.used - size)


@dataclass(frozen=True, slots=True)
class Budgets:
    """Limits of one query's client-side operators.

    memory_rows: rows an operator that needs all of its input (ORDER BY,
        DISTINCT, GROUP BY, hash joins, OptJoin's views) keeps in memory;
        beyond it, it spills to files in `temp_dir` (removed when the query
        ends or is closed).
    disk_bytes: what the query's temporary files may hold in all; a query
        that needs more fails with `budget-exceeded`, never a partial answer.
    disk_pool: what the temporary files of all the queries sharing the pool
        may hold at once (None: no limit but each query's own); a query whose
        next file would pass it fails with `budget-exceeded` too.
    block_size: mappings shipped per request as VALUES by bind joins
        (BindLeftJoin, EXISTS, MINUS, SERVICE, path frontiers).
    path_nodes: (start, node) pairs a property-path closure may visit.
    yield_rows: client-side operators hand the event loop back at least
        every this many rows, and every `ops.base.SLICE_S` seconds of work
        (the gateway runs many queries in one loop).
    batch_bytes: about the most characters of terms a batch of rows passed
        between operators holds (a server page is cut into slices; BIND hands
        its rows on once its values reach it): a few rows of huge computed
        literals are a batch, not yield_rows of them.
    """

    memory_rows: int = 100_000
    disk_bytes: int = 1 << 30
    block_size: int = 100
    path_nodes: int = 1_000_000
    yield_rows: int = 2_000
    batch_bytes: int = 4 << 20
    temp_dir: str | None = None
    disk_pool: DiskPool | None = field(default=None, compare=False)


DEFAULT_BUDGETS = Budgets()
