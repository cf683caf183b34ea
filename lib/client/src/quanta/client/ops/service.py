"""SERVICE: a bind join against another SPARQL endpoint, reached only through the allowlist.

Blocks of the left rows' values of the variables the SERVICE pattern shares
with them are sent as VALUES (numbered by a hidden variable), one request
per block; without a left side the pattern is sent once. An endpoint that is
a variable is resolved per row; an IRI not on the allowlist is refused
(`service-not-allowed`). SERVICE SILENT: a failing endpoint gives one empty
solution (the left row goes on unchanged), as the spec says.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from quanta.client.ops.base import Batch, Op, Shape, compatible, merge
from quanta.client.plan.context import QueryContext
from quanta.client.plan.serialize import values_clause
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import literal

XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"


@dataclass(frozen=True)
class ServiceCall:
    endpoint: str | None  # the IRI, or None when it is the variable in `endpoint_slot`
    endpoint_slot: int | None
    group: str  # the pattern's text, `{ ... }`
    prologue: str
    slots: dict[str, int]  # the pattern's variables (names as in `group`) -> slots
    silent: bool
    row_name: str  # the hidden variable numbering shipped rows


class ServiceJoin(Op):
    def __init__(self, left: Op, call: ServiceCall, shape: Shape, maybe: frozenset[int]) -> None:
        self.left, self.call, self.shape = left, call, shape
        self.shared = sorted(left.maybe & frozenset(call.slots.values()))
        self.maybe, self.certain = left.maybe | maybe, left.certain

    def children(self) -> list[Op]:
        return [self.left]

    def label(self) -> str:
        return f"ServiceJoin <{self.call.endpoint}> {self.call.group}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        block: list[Row] = []
        async with aclosing(self.left.run(ctx)) as batches:
            async for batch in batches:
                block += batch
                while len(block) >= ctx.budgets.block_size:
                    yield await self._block(ctx, block[: ctx.budgets.block_size])
                    block = block[ctx.budgets.block_size :]
        if block:
            yield await self._block(ctx, block)

    async def _block(self, ctx: QueryContext, rows: list[Row]) -> Batch:
        by_endpoint: dict[str | None, list[Row]] = {}
        for row in rows:
            iri = self.call.endpoint if self.call.endpoint_slot is None else row[self.call.endpoint_slot]
            by_endpoint.setdefault(iri, []).append(row)
        out: Batch = []
        for iri, group in by_endpoint.items():
            out += await self._call(ctx, iri, group)
        return out

    async def _call(self, ctx: QueryContext, iri: str | None, rows: list[Row]) -> Batch:
        call = self.call
        endpoint = ctx.services.get(iri) if iri is not None else None
        if endpoint is None:
            if call.silent:
                return rows
            what = f"<{iri}>" if iri is not None else "an unbound endpoint variable"
            raise QueryError(ErrorKind.SERVICE_NOT_ALLOWED, f"SERVICE {what} is not on the allowlist")
        names = [call.row_name] + [n for n, s in call.slots.items() if s in self.shared]
        slots = [s for n, s in call.slots.items() if s in self.shared]
        values = [
            (literal(str(i), datatype=XSD_INTEGER), *(_shippable(row[s]) for s in slots)) for i, row in enumerate(rows)
        ]
        text = f"{call.prologue}\nSELECT * WHERE {{ {values_clause(names, values)} {call.group} }}"
        try:
            head, results = await endpoint.select(text)
        except QueryError as error:
            if call.silent:
                return rows
            raise QueryError(ErrorKind.SERVICE_FAILED, f"SERVICE <{iri}>: {error.message}") from error
        positions = [(i, call.slots[v]) for i, v in enumerate(head) if v in call.slots]
        number = head.index(call.row_name) if call.row_name in head else None
        out: Batch = []
        for values_row in results:
            cells: list[str | None] = [None] * self.shape.width
            for i, slot in positions:
                term = values_row[i]
                cells[slot] = f"_:service{term[2:]}" if term is not None and term.startswith("_:") else term
            remote = tuple(cells)
            index = values_row[number] if number is not None else None
            targets = [rows[int(index[1 : index.rindex('"')])]] if index is not None else rows
            out += [merge(left, remote) for left in targets if compatible(left, remote, self.shared)]
        return out


def _shippable(term: str | None) -> str | None:
    """Blank nodes of this dataset mean nothing to another endpoint: UNDEF (then checked here)."""
    return None if term is not None and term.startswith("_:") else term
