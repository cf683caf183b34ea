"""ORDER BY: SPARQL's order over terms, an external merge sort, and top-k for ORDER BY ... LIMIT k.

The order (SPARQL 1.1 section 15.1): unbound < blank nodes < IRIs <
literals; literals that `<` compares (numbers by value, strings, booleans,
dates) in that order, each kind in a group of its own, and the rest by
datatype and lexical form, so the order is total and the same every time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncGenerator, Iterator
from functools import lru_cache
from typing import Any

from quanta.client.ops.base import Batch, Op, Pacer
from quanta.client.ops.spill import ExternalSort, SortedChunks
from quanta.client.plan.context import QueryContext
from quanta.sparql.expr_dates import DateTime
from quanta.sparql.expr_values import (
    BOOLEAN,
    DATE,
    DATETIME,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INTEGER,
    LANG,
    STRING,
    make_literal,
)
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import split_literal

_NUMBERS = (INTEGER, DECIMAL, FLOAT, DOUBLE)
OUT_ROWS = 4096  # rows per batch handed on


@lru_cache(maxsize=65536)
def term_key(term: str | None) -> tuple[Any, ...]:
    if term is None:
        return (0,)
    if term.startswith("_:"):
        return (1, term)
    if not term.startswith('"'):
        return (2, term)
    lexical, lang, datatype = split_literal(term)
    value = make_literal(lexical, lang, datatype)
    kind = value.kind
    if kind in _NUMBERS:
        number = value.val
        if isinstance(number, float) and math.isnan(number):
            return (3, 0, 0, 0, term)
        return (3, 0, 1, number, term)
    if kind in (STRING, LANG):
        return (3, 1, lexical, lang or "", term)
    if kind == BOOLEAN:
        return (3, 2, bool(value.val), term)
    if kind in (DATETIME, DATE) and isinstance(value.val, DateTime):
        return (3, 3, value.val.stamp, term)
    return (3, 4, datatype or "", lexical, term)


class Descending:
    """A key component sorted the other way."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key

    def __lt__(self, other: Descending) -> bool:
        return other.key < self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def row_key(conditions: list[tuple[int, bool]]) -> Any:
    """The sort key of a row: one term key per condition (slot, descending)."""

    def key(row: Row) -> tuple[Any, ...]:
        return tuple(Descending(term_key(row[s])) if desc else term_key(row[s]) for s, desc in conditions)

    return key


class OrderBy(Op):
    """Sorts its input: in memory up to the budget, else by sorted runs on
    disk merged at the end. With `top` (ORDER BY ... LIMIT k, OFFSET
    included) only the first `top` rows are kept: memory for 2k rows at most."""

    def __init__(self, child: Op, conditions: list[tuple[int, bool]], top: int | None = None) -> None:
        self.child, self.conditions, self.top = child, conditions, top
        self.maybe, self.certain = child.maybe, child.certain
        self.key = row_key(conditions)

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"OrderBy {self.conditions} top={self.top}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        # Sorted a chunk at a time and merged lazily, handing the loop back as it goes:
        # the event loop (the gateway's) keeps turning through a sort of any size. Each row's
        # key is computed once: rows are sorted, spilled and merged as (key, arrival, row),
        # compared as tuples (the arrival keeps ties in input order, and rows uncompared).
        pacer = Pacer(ctx.budgets.yield_rows)
        arrival = itertools.count()
        key = self.key

        def keyed(batch: Batch) -> list[tuple[Any, int, Row]]:
            return [(key(row), next(arrival), row) for row in batch]

        if self.top is not None and self.top <= ctx.budgets.memory_rows:
            kept = SortedChunks()
            async for batch in self.child.run(ctx):
                await kept.add(keyed(batch), pacer)
                if len(kept) >= 2 * self.top + 1024:
                    await kept.first(self.top, pacer)
            await kept.first(self.top, pacer)
            for rows in _chunks([row for _, _, row in kept.chunks[0]]):
                yield rows
            return
        sort = ExternalSort(ctx, ctx.budgets.memory_rows, pacer)
        async for batch in self.child.run(ctx):
            await sort.add(keyed(batch))
        await sort.finish()
        out: Batch = []
        for _, _, row in sort.sorted():
            out.append(row)
            await pacer.tick()
            if len(out) >= OUT_ROWS:
                yield out
                out = []
        yield out


def _chunks(rows: Batch) -> Iterator[Batch]:
    """`rows` in batches of OUT_ROWS at most (what comes after renders them a batch at a time)."""
    for start in range(0, len(rows), OUT_ROWS):
        yield rows[start : start + OUT_ROWS]
    if not rows:
        yield []
