"""What every client-side operator is: an async producer of batches of rows.

A row has one cell per slot of the query (`quanta.client.plan.scope`): a
dictionary-syntax term or None (unbound). Operators hand rows on in
batches (a server page is one), and give the event loop back at least every
`Budgets.yield_rows` rows of their own work and every SLICE_S seconds of it
(`Pacer`): the gateway runs many queries, and answers its probes, in one loop.
A batch is bounded in bytes too: a server page is cut into slices of about
`Budgets.batch_bytes`, and an operator that builds terms (BIND) hands its rows
on once it has built that many characters.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Iterable, Sequence
from typing import Protocol

from quanta.client.plan.context import QueryContext
from quanta.sparql.term_rows import Row

SLICE_S = 0.01  # the longest an operator works before handing the loop back (about)
Batch = list[Row]


class Shape(Protocol):
    """The width of a plan's rows (its slots): final once planning is done,
    so operators read it when they run."""

    @property
    def width(self) -> int: ...


class Op(ABC):
    """`maybe`: slots some row may bind; `certain`: slots every row binds."""

    maybe: frozenset[int]
    certain: frozenset[int]

    @abstractmethod
    def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        """The rows, batch by batch (a batch may be empty)."""

    def children(self) -> Sequence[Op]:
        return ()

    def explain(self, indent: int = 0) -> str:
        """The plan below this operator, one operator a line."""
        lines = ["  " * indent + self.label()]
        lines += [child.explain(indent + 1) for child in self.children()]
        return "\n".join(lines)

    def label(self) -> str:
        return type(self).__name__


def merge(a: Row, b: Row) -> Row:
    """The union of two compatible rows."""
    return tuple(x if x is not None else y for x, y in zip(a, b, strict=True))


def with_cell(row: Row, slot: int, value: str | None) -> Row:
    """The row with one cell changed."""
    cells = list(row)
    cells[slot] = value
    return tuple(cells)


def compatible(a: Row, b: Row, slots: Iterable[int]) -> bool:
    """Whether two rows agree on every slot both bind (among `slots`)."""
    for s in slots:
        x, y = a[s], b[s]
        if x is not None and y is not None and x != y:
            return False
    return True


class Pacer:
    """Counts work and hands the event loop back every `every` units, or once
    SLICE_S seconds have passed since it last did (work whose cost per row
    varies, expressions say, is bounded by time rather than by rows)."""

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self.done = 0
        self.since = time.perf_counter()

    async def tick(self, work: int = 1) -> None:
        if self.due(work):
            await self.rest()

    def due(self, work: int = 1) -> bool:
        """Count `work`; whether the loop is due back (an operator that builds a batch
        row by row hands on what it has, then `rest`s)."""
        self.done += work
        return self.done >= self.every or time.perf_counter() - self.since >= SLICE_S

    async def rest(self) -> None:
        """Hand the loop back (one turn), and start counting again."""
        self.done = 0
        await asyncio.sleep(0)
        self.since = time.perf_counter()


async def collect(op: Op, ctx: QueryContext) -> Batch:
    """All rows of `op` (for inputs known to be small)."""
    out: Batch = []
    async for batch in op.run(ctx):
        out += batch
    return out
