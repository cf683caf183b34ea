"""EXISTS over a pattern the server does not evaluate as one piece: per
distinct row, the row's values substituted into the pattern (SPARQL's
definition of EXISTS), planned and run until its first solution. One plan
(and its requests) per distinct row: the bind form (ops/bind.py) is used
whenever the server evaluates the pattern."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from quanta.client.ops.base import Batch, Op, with_cell
from quanta.client.plan.context import QueryContext
from quanta.sparql.terms import literal

XSD_BOOLEAN = "http://www.w3.org/2001/XMLSchema#boolean"
TRUE = literal("true", datatype=XSD_BOOLEAN)
FALSE = literal("false", datatype=XSD_BOOLEAN)

# The plan of the pattern with these (slot, term) substituted.
Substitute = Callable[[tuple[tuple[int, str], ...]], Op]


class SubstitutedExists(Op):
    def __init__(self, child: Op, slots: list[int], slot: int, substitute: Substitute) -> None:
        self.child, self.slots, self.slot, self.substitute = child, slots, slot, substitute
        self.maybe, self.certain = child.maybe | {slot}, child.certain | {slot}

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"SubstitutedExists slots={self.slots}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        known: dict[tuple[tuple[int, str], ...], bool] = {}
        slot = self.slot
        async for batch in self.child.run(ctx):
            out: Batch = []
            for row in batch:
                values = tuple((s, v) for s in self.slots if (v := row[s]) is not None)
                found = known.get(values)
                if found is None:
                    if len(known) >= ctx.budgets.memory_rows:
                        known.clear()
                    found = known[values] = await self._exists(ctx, values)
                out.append(with_cell(row, slot, TRUE if found else FALSE))
            yield out

    async def _exists(self, ctx: QueryContext, values: tuple[tuple[int, str], ...]) -> bool:
        async with aclosing(self.substitute(values).run(ctx)) as batches:
            async for batch in batches:
                if batch:
                    return True
        return False
