"""Bind joins: blocks of the left side's mappings shipped to a server piece as VALUES.

The left rows are grouped into blocks of distinct keys (their values of the
shipped variables), of `Budgets.block_size` keys; while the left side has given
fewer, what it gave goes at once when it holds 8 keys, then 16, 32... (a slow
left side's first answers need not wait for a full block). One server query
per block (`Piece.render(values)`), followed to its last page, returns the
piece's rows that join each key. A block costs at least one request, so a bind
join costs about |left keys| / block_size requests, plus at most four for
smaller blocks of a slow left side (times the quanta each block takes): the
paper's BindJoin and BindLeftJoin.

When a key leaves a shipped variable unbound (UNDEF), or when every row of a
key must be told apart (EXISTS, MINUS), a hidden variable numbers the keys.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass

from quanta.client.ops.base import Batch, Op, Pacer, merge, with_cell
from quanta.client.ops.remote import FOREIGN, Piece, fetch
from quanta.client.plan.context import QueryContext
from quanta.client.plan.serialize import values_clause
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import literal

XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"
CHUNK = 4096  # rows per batch handed on
FIRST_BLOCK = 8  # keys a bind join's first block may go with while the left side gives more (doubling)
Key = tuple[str | None, ...]


@dataclass(frozen=True)
class Ship:
    """What a bind join ships: the slots (and their names in the text), and
    the hidden variable that numbers keys (its name, and a slot to read it)."""

    slots: tuple[int, ...]
    names: tuple[str, ...]
    row_name: str
    row_slot: int
    numbered: bool = False  # always number the keys (EXISTS, MINUS)

    def key(self, row: Row) -> Key:
        return tuple(row[s] for s in self.slots)


async def matches(ctx: QueryContext, piece: Piece, ship: Ship, keys: list[Key]) -> AsyncIterator[list[tuple[int, Row]]]:
    """The piece's rows for a block of keys, each with the index of its key."""
    numbered = ship.numbered or not ship.slots or any(v is None for k in keys for v in k)
    out = piece.source.outgoing
    shipped = [(i, tuple(out(v) for v in k)) for i, k in enumerate(keys)]
    shipped = [(i, k) for i, k in shipped if FOREIGN not in k]  # a blank node of another graph matches nothing
    if not shipped:
        return
    if numbered:
        names = (ship.row_name, *ship.names)
        rows = [(literal(str(i), datatype=XSD_INTEGER), *k) for i, k in shipped]
    else:
        names, rows = ship.names, [k for _, k in shipped]
    index = {k: i for i, k in enumerate(keys)}
    text = piece.render(values_clause(names, rows))
    async for batch in fetch(ctx, piece.source, text, piece.columns):
        found: list[tuple[int, Row]] = []
        for r in batch:
            if numbered:
                number = r[ship.row_slot]
                if number is None:
                    continue
                i = int(number[1 : number.rindex('"')])
            else:
                i = index.get(ship.key(r), -1)
                if i < 0:
                    continue
            found.append((i, with_cell(r, ship.row_slot, None)))
        yield found


async def blocks(
    ctx: QueryContext, left: Op, key: Callable[[Row], Key]
) -> AsyncIterator[tuple[list[Key], list[list[Row]]]]:
    """The left rows in blocks: distinct keys and the rows of each. A block
    holds `block_size` keys; at the end of each of the left side's batches,
    a smaller one goes when it holds at least 8 keys, then 16, 32... (the
    first answers need not wait for `block_size` keys from a slow left side;
    a left side that gives its rows at once, as a finished partial answer
    does, goes in full blocks: 166 keys in 2 requests, not 5). A block also
    ends at `memory_rows` rows (when few keys have many rows, a key may then
    be shipped in several blocks)."""
    full, most = ctx.budgets.block_size, ctx.budgets.memory_rows
    size = min(FIRST_BLOCK, full)
    keys: dict[Key, list[Row]] = {}
    held = 0
    async with aclosing(left.run(ctx)) as batches:
        async for batch in batches:
            for row in batch:
                k = key(row)
                rows = keys.get(k)
                if rows is None:
                    if len(keys) >= full:
                        yield list(keys), list(keys.values())
                        keys, held = {}, 0
                    rows = keys[k] = []
                rows.append(row)
                held += 1
                if held >= most:
                    yield list(keys), list(keys.values())
                    keys, held = {}, 0
            if len(keys) >= size:  # the next batch may be slow to come
                yield list(keys), list(keys.values())
                keys, held, size = {}, 0, min(2 * size, full)
    if keys:
        yield list(keys), list(keys.values())


class BindJoin(Op):
    """left ⋈ piece, the piece run once per block of left keys."""

    def __init__(self, left: Op, piece: Piece, ship: Ship) -> None:
        self.left, self.piece, self.ship = left, piece, ship
        self.maybe = left.maybe | piece.maybe
        self.certain = left.certain | piece.certain

    def children(self) -> list[Op]:
        return [self.left]

    def label(self) -> str:
        return f"BindJoin ship={list(self.ship.names)} {self.piece.render('VALUES ...')}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        async for keys, groups in blocks(ctx, self.left, self.ship.key):
            async for found in matches(ctx, self.piece, self.ship, keys):
                out: Batch = []
                for i, r in found:
                    out += [merge(left, r) for left in groups[i]]
                    if len(out) >= CHUNK:  # the output is handed on in bounded batches
                        await pacer.tick(len(out))
                        yield out
                        out = []
                yield out


class BindLeftJoin(Op):
    """left ⟕ piece: the rows of each block that match nothing come out alone.
    `keep` filters the merged rows here when the OPTIONAL's condition could
    not be shipped (the server evaluates it otherwise)."""

    def __init__(self, left: Op, piece: Piece, ship: Ship, keep: Callable[[Row], bool] | None = None) -> None:
        self.left, self.piece, self.ship, self.keep = left, piece, ship, keep
        self.maybe = left.maybe | piece.maybe
        self.certain = left.certain

    def children(self) -> list[Op]:
        return [self.left]

    def label(self) -> str:
        return f"BindLeftJoin ship={list(self.ship.names)} {self.piece.render('VALUES ...')}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        async for keys, groups in blocks(ctx, self.left, self.ship.key):
            matched = [[False] * len(rows) for rows in groups]
            async for found in matches(ctx, self.piece, self.ship, keys):
                out: Batch = []
                for i, r in found:
                    for j, left in enumerate(groups[i]):
                        row = merge(left, r)
                        if self.keep is None or self.keep(row):
                            matched[i][j] = True
                            out.append(row)
                    if len(out) >= CHUNK:
                        await pacer.tick(len(out))
                        yield out
                        out = []
                await pacer.tick(len(out) + 1)
                yield out
            yield [left for i, rows in enumerate(groups) for j, left in enumerate(rows) if not matched[i][j]]


class BindFilter(Op):
    """The left rows whose key has (or, `negated`, has not) a row in the
    piece: FILTER EXISTS and NOT EXISTS over a server piece (the keys are
    injected into every group of the piece: substitution), and MINUS (the
    piece checks compatibility and shared domain itself)."""

    def __init__(
        self, left: Op, piece: Piece, ship: Ship, negated: bool, name: str, keep_unbound: bool = False
    ) -> None:
        self.left, self.piece, self.ship, self.negated, self.name = left, piece, ship, negated, name
        self.keep_unbound = keep_unbound  # MINUS: a row binding no shared variable is never removed
        self.maybe, self.certain = left.maybe, left.certain

    def children(self) -> list[Op]:
        return [self.left]

    def label(self) -> str:
        return f"{self.name} ship={list(self.ship.names)} {self.piece.render('VALUES ...')}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        async for keys, groups in blocks(ctx, self.left, self.ship.key):
            if self.keep_unbound:
                alone = [i for i, k in enumerate(keys) if all(v is None for v in k)]
                yield [row for i in alone for row in groups[i]]
                asked = [i for i, k in enumerate(keys) if any(v is not None for v in k)]
                keys, groups = [keys[i] for i in asked], [groups[i] for i in asked]
                if not keys:
                    continue
            hit = [False] * len(keys)
            async for found in matches(ctx, self.piece, self.ship, keys):
                for i, _ in found:
                    hit[i] = True
            yield [row for i, rows in enumerate(groups) if hit[i] != self.negated for row in rows]


class ExistsColumn(Op):
    """EXISTS { piece } for each left row, as a boolean in `slot` (for
    expressions that use it otherwise than as a whole FILTER)."""

    TRUE = literal("true", datatype="http://www.w3.org/2001/XMLSchema#boolean")
    FALSE = literal("false", datatype="http://www.w3.org/2001/XMLSchema#boolean")

    def __init__(self, left: Op, piece: Piece, ship: Ship, slot: int) -> None:
        self.left, self.piece, self.ship, self.slot = left, piece, ship, slot
        self.maybe, self.certain = left.maybe | {slot}, left.certain | {slot}

    def children(self) -> list[Op]:
        return [self.left]

    def label(self) -> str:
        return f"ExistsColumn ship={list(self.ship.names)} {self.piece.render('VALUES ...')}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        slot = self.slot
        async for keys, groups in blocks(ctx, self.left, self.ship.key):
            hit = [False] * len(keys)
            async for found in matches(ctx, self.piece, self.ship, keys):
                for i, _ in found:
                    hit[i] = True
            yield [
                with_cell(row, slot, self.TRUE if hit[i] else self.FALSE)
                for i, rows in enumerate(groups)
                for row in rows
            ]
