"""GRAPH ?g { P }: P evaluated in each named graph of the dataset, ?g bound to the graph's IRI."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from quanta.client.ops.base import Batch, Op, with_cell
from quanta.client.plan.context import QueryContext


class GraphUnion(Op):
    """The union over the named graphs; a row in which P bound ?g itself to
    another term is dropped (it is joined with ?g = the graph)."""

    def __init__(self, branches: list[tuple[str, Op]], slot: int) -> None:
        self.branches, self.slot = branches, slot
        ops = [op for _, op in branches]
        self.maybe = frozenset().union(*(op.maybe for op in ops)) | {slot}
        self.certain = (frozenset.intersection(*(op.certain for op in ops)) if ops else frozenset()) | {slot}

    def children(self) -> list[Op]:
        return [op for _, op in self.branches]

    def label(self) -> str:
        return f"GraphUnion slot {self.slot} over {len(self.branches)} graphs"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        slot = self.slot
        for graph, op in self.branches:
            async with aclosing(op.run(ctx)) as batches:
                async for batch in batches:
                    yield [with_cell(row, slot, graph) for row in batch if row[slot] is None or row[slot] == graph]
