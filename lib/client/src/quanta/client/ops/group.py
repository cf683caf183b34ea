"""GROUP BY and aggregates: hash aggregation within the memory budget, hash partitioning beyond it.

Groups are kept in memory while their states fit the budget (a group counts
one, plus what DISTINCT and GROUP_CONCAT keep). Past it, the rows of groups
not in memory go to partition files by a hash of their key: each group is
then wholly in memory or wholly in one partition, and partitions are
aggregated one after the other (split again if one does not fit).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable

from quanta.client.ops.aggregates import Aggregate, State
from quanta.client.ops.base import Batch, Op, Pacer, Shape
from quanta.client.ops.spill import Partitions, RowFile, oversized
from quanta.client.plan.context import QueryContext
from quanta.sparql.term_rows import Row

Key = tuple[str | None, ...]
OUT_ROWS = 4096  # rows per batch handed on


class Group(Op):
    """`keys`: the grouping slots (an expression key has been computed into a
    hidden slot); `bound`: those of them that are variables of the output.
    Without keys the whole input is one group, even when empty. `times`: the
    slot that says how many times each input row counts (the server's partial
    answers: a quantum's distinct rows with their counts), None: once."""

    def __init__(
        self, child: Op, keys: list[int], bound: list[int], aggregates: list[Aggregate], shape: Shape,
        times: int | None = None, why: str = "",
    ) -> None:  # fmt: skip
        self.child, self.keys, self.bound, self.aggregates, self.shape = child, keys, bound, aggregates, shape
        self.times = times
        self.why = why  # what the cost model estimated, when it chose the workers' tally
        results = frozenset(a.slot for a in aggregates)
        self.maybe = frozenset(bound) | results
        self.certain = frozenset(s for s in bound if s in child.certain) | frozenset(
            a.slot for a in aggregates if a.kind == "Count"
        )

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        weighed = "" if self.times is None else f" times={self.times}"
        why = f" ({self.why})" if self.why else ""
        return f"Group keys={self.keys} aggregates={[(a.kind, a.slot) for a in self.aggregates]}{weighed}{why}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        table = _Table(self, ctx, 0)
        async for batch in self.child.run(ctx):
            await table.add_all(batch, pacer)
        if not table.groups and not self.keys and table.spill is None:
            table.group(())  # the implicit group of an empty input
        async for out in self._emit(ctx, table, pacer):
            yield out

    async def _emit(self, ctx: QueryContext, table: _Table, pacer: Pacer) -> AsyncGenerator[Batch, None]:
        async for out in table.rows(pacer):
            yield out
        if table.spill is None:
            return
        for part in table.spill.finish():
            inner = _Table(self, ctx, table.depth + 1)
            await inner.add_all(part, pacer)
            part.delete()
            async for out in self._emit(ctx, inner, pacer):
                yield out


def count_of(term: str | None) -> int:
    """A partial answer's count: an xsd:integer literal the server wrote."""
    if term is None or not term.startswith('"'):
        raise ValueError(f"not a count: {term!r}")
    return int(term[1 : term.index('"', 1)])


class _Table:
    def __init__(self, group: Group, ctx: QueryContext, depth: int) -> None:
        self.op, self.ctx, self.depth = group, ctx, depth
        self.groups: dict[Key, list[State]] = {}
        self.spill: Partitions | None = None
        self.units = 0

    def group(self, key: Key) -> list[State]:
        states = [a.state() for a in self.op.aggregates]
        self.groups[key] = states
        self.units += 1
        return states

    async def add_all(self, rows: Iterable[Row] | RowFile, pacer: Pacer) -> None:
        """Each row into its group's states (aggregate expressions cost what they cost:
        the loop is handed back by time as well as by rows)."""
        keys, limit, times = self.op.keys, self.ctx.budgets.memory_rows, self.op.times
        for row in rows:
            await pacer.tick()
            key = tuple(row[s] for s in keys)
            states = self.groups.get(key)
            if states is None:
                if self.units >= limit:
                    if self.spill is None:
                        self.spill = Partitions(self.ctx, "group", lambda r: tuple(r[s] for s in keys), self.depth)
                    self.spill.add(row)
                    continue
                states = self.group(key)
            n = 1 if times is None else count_of(row[times])
            for state in states:
                before = state.size
                state.add(row, n)
                self.units += state.size - before
            if self.units > 2 * limit and len(self.groups) == 1:
                raise oversized(self.ctx, "an aggregate over one group")

    async def rows(self, pacer: Pacer) -> AsyncGenerator[Batch, None]:
        """The groups' rows in the order the groups came, in batches of OUT_ROWS."""
        width, keys, bound = self.op.shape.width, self.op.keys, set(self.op.bound)
        groups, self.groups = self.groups, {}
        out: Batch = []
        for key, states in groups.items():
            cells: list[str | None] = [None] * width
            for slot, term in zip(keys, key, strict=True):
                if slot in bound:
                    cells[slot] = term
            for state in states:
                cells[state.agg.slot] = state.result()
            out.append(tuple(cells))
            await pacer.tick()
            if len(out) >= OUT_ROWS:
                yield out
                out = []
        yield out
