"""OptJoin (the SaGe paper, section 3.4): P1 OPTIONAL { P2 } in one server query
when the server evaluates P1 and P2.

P1 OPTIONAL P2 = (P1 JOIN P2) UNION (the rows of P1 that no row of P1 JOIN P2
extends): the client sends `{ P1 P2 FILTER(condition) } UNION { P1 BIND(1 AS ?tag) }`.
The server runs a UNION's branches in order: the rows of the join come
first, and are answers at once (their values of P1's variables are noted);
then P1's rows (tagged), each an answer unless a join row extended it.
Requests: the quanta of that one query, whatever the number of P1's rows (a
bind left join needs one query per block of them). The noted values are
kept in memory up to the budget; past it, they and P1's rows are
partitioned to disk and matched a partition at a time at the end.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from quanta.client.ops.base import Batch, Op, Pacer, Shape
from quanta.client.ops.remote import Piece, fetch
from quanta.client.ops.spill import Partitions, RowFile, split
from quanta.client.plan.context import QueryContext
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind
from quanta.sparql.term_rows import Row

Key = tuple[str | None, ...]


class OptJoin(Op):
    """`key`: the slots P1 projects; `tag`: the slot of the tag variable."""

    def __init__(self, piece: Piece, key: list[int], tag: int, shape: Shape, certain: frozenset[int]) -> None:
        self.piece, self.key_slots, self.tag, self.shape = piece, key, tag, shape
        self.text = piece.render("")
        self.maybe = piece.maybe - {tag}
        self.certain = certain

    def label(self) -> str:
        return f"OptJoin {self.text}"

    def key(self, row: Row) -> Key:
        return tuple(row[s] for s in self.key_slots)

    def row(self, key: Key) -> Row:
        cells: list[str | None] = [None] * self.shape.width
        for s, v in zip(self.key_slots, key, strict=True):
            cells[s] = v
        return tuple(cells)

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        limit = ctx.budgets.memory_rows
        matched: set[Key] = set()
        spill: Partitions | None = None
        alone = False  # P1's own rows have begun (the join's are over)
        tag = self.tag
        source, columns = self.piece.source, self.piece.columns
        async with aclosing(fetch(ctx, source, self.text, columns)) as pages:
            async for batch in pages:
                out: Batch = []
                for row in batch:
                    k = self.key(row)
                    if row[tag] is None:  # a row of the join
                        if alone:
                            raise QueryError(ErrorKind.INTERNAL, "OptJoin: the server answered the UNION out of order")
                        out.append(row)
                        if spill is not None:
                            spill.add((k, 0))
                        else:
                            matched.add(k)
                    else:
                        alone = True
                        if spill is not None:
                            spill.add((k, 1))
                        elif k not in matched:
                            out.append(self.row(k))
                if spill is None and len(matched) > limit:
                    spill = Partitions(ctx, "optjoin", lambda entry: entry[0], 0)
                    for k in matched:
                        spill.add((k, 0))
                    matched = set()
                await pacer.tick(len(batch))
                yield out
        if spill is not None:
            for part in spill.finish():
                async for out in self._unmatched(ctx, part, 1, pacer):
                    yield out

    async def _unmatched(
        self, ctx: QueryContext, part: RowFile, depth: int, pacer: Pacer
    ) -> AsyncGenerator[Batch, None]:
        """The unmatched rows of P1 in one partition (split again while its keys do not fit)."""
        limit = ctx.budgets.memory_rows
        counts: dict[Key, int] = {}
        matched: set[Key] = set()
        for k, n in part:
            if n:
                counts[k] = counts.get(k, 0) + n
            else:
                matched.add(k)
            if len(counts) + len(matched) > limit:
                break
        else:
            part.delete()
            await pacer.tick(part.count)
            yield [self.row(k) for k, n in counts.items() if k not in matched for _ in range(n)]
            return
        counts, matched = {}, set()
        for smaller in split(ctx, part, "optjoin", lambda entry: entry[0], depth):
            async for out in self._unmatched(ctx, smaller, depth + 1, pacer):
                yield out
