"""What one query may use on the client: memory, disk, and the size of shipped blocks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Budgets:
    """Limits of one query's client-side operators.

    memory_rows: rows an operator that needs all of its input (ORDER BY,
        DISTINCT, GROUP BY, hash joins, OptJoin's views) keeps in memory;
        beyond it, it spills to files in `temp_dir` (removed when the query
        ends or is closed).
    disk_bytes: what the query's temporary files may hold in all; a query
        that needs more fails with `budget-exceeded`, never a partial answer.
    block_size: mappings shipped per request as VALUES by bind joins
        (BindLeftJoin, EXISTS, MINUS, SERVICE, path frontiers).
    path_nodes: (start, node) pairs a property-path closure may visit.
    yield_rows: client-side operators hand the event loop back at least
        every this many rows (the gateway runs many queries in one loop).
    """

    memory_rows: int = 100_000
    disk_bytes: int = 1 << 30
    block_size: int = 100
    path_nodes: int = 1_000_000
    yield_rows: int = 2_000
    temp_dir: str | None = None


DEFAULT_BUDGETS = Budgets()
