"""Property-path closures (p*, p+, p?) by breadth-first expansion on the client.

Each row of the left input gives a start node: the subject (bound by the
row or a constant), else the object (expanded backwards), else every node
of the graph (p*, p?) or every subject of a step (p+). All starts of a block
expand level by level together: a level asks the server for the next step
of the frontier nodes not seen yet, shipped as VALUES in blocks
(`Budgets.block_size` nodes a request), and steps already fetched are kept
for the rest of the query. Requests: one per block of new frontier nodes
per level (times the quanta each takes). Each end reached counts once per
start (SPARQL's closures have set semantics); the (start, node) pairs
visited are bounded by `Budgets.path_nodes`, past which the query fails
(`budget-exceeded`) rather than answer in part.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass

from quanta.client.ops.base import Batch, Op, Pacer, Shape
from quanta.client.plan.context import QueryContext
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind
from quanta.sparql.term_rows import Row

# Makes the operator of one step: given rows binding the step's start slot
# (forward: its subject; backward: its object), rows of (subject, object) pairs.
StepMaker = Callable[[list[Row], bool], Op]


@dataclass(frozen=True)
class End:
    """A path end: a constant term, or a slot."""

    term: str | None = None
    slot: int | None = None

    def value(self, row: Row) -> str | None:
        return self.term if self.slot is None else row[self.slot]


class Steps:
    """One step of the path, fetched on demand and kept: node -> next nodes."""

    def __init__(self, make: StepMaker, a: int, b: int, shape: Shape, member: Callable[[list[Row]], Op]) -> None:
        self.make, self.a, self.b, self.shape, self.member = make, a, b, shape, member
        self.forward: dict[str, list[str]] = {}
        self.backward: dict[str, list[str]] = {}
        self.complete = False  # every step is known (all_pairs ran)
        self.subjects: list[str] = []
        self.kept = 0

    async def fetch(self, ctx: QueryContext, nodes: set[str], forward: bool) -> None:
        if self.complete:
            return
        known = self.forward if forward else self.backward
        missing = sorted(n for n in nodes if n not in known)
        size = ctx.budgets.block_size
        for i in range(0, len(missing), size):
            block = missing[i : i + size]
            start, end = (self.a, self.b) if forward else (self.b, self.a)
            rows: list[Row] = []
            for n in block:
                cells: list[str | None] = [None] * self.shape.width
                cells[start] = n
                rows.append(tuple(cells))
                known[n] = []
            async with aclosing(self.make(rows, forward).run(ctx)) as batches:
                async for batch in batches:
                    for row in batch:
                        x, y = row[start], row[end]
                        if x is not None and y is not None:
                            known.setdefault(x, []).append(y)
                            self.kept += 1
            self._check(ctx)

    async def all_pairs(self, ctx: QueryContext) -> list[str]:
        """Every step (kept, both ways); returns the distinct subjects."""
        if self.complete:
            return self.subjects
        subjects: dict[str, None] = {}
        self.forward, self.backward = {}, {}
        async with aclosing(self.make([], True).run(ctx)) as batches:
            async for batch in batches:
                for row in batch:
                    x, y = row[self.a], row[self.b]
                    if x is None or y is None:
                        continue
                    subjects[x] = None
                    self.forward.setdefault(x, []).append(y)
                    self.backward.setdefault(y, []).append(x)
                    self.kept += 1
                self._check(ctx)
        self.complete = True
        self.subjects = list(subjects)
        return self.subjects

    async def members(self, ctx: QueryContext, nodes: set[str]) -> set[str]:
        """The nodes that are a subject or object in the graph (zero steps
        reach a node of the graph only; a constant of the query always)."""
        found: set[str] = set()
        for i in range(0, len(nodes), ctx.budgets.block_size):
            block = sorted(nodes)[i : i + ctx.budgets.block_size]
            rows: list[Row] = []
            for n in block:
                cells: list[str | None] = [None] * self.shape.width
                cells[self.a] = n
                rows.append(tuple(cells))
            async with aclosing(self.member(rows).run(ctx)) as batches:
                async for batch in batches:
                    found.update(node for r in batch if (node := r[self.a]) is not None)
        return found

    def _check(self, ctx: QueryContext) -> None:
        if self.kept > ctx.budgets.path_nodes:
            raise QueryError(
                ErrorKind.BUDGET_EXCEEDED,
                f"a property path's steps exceed the budget of {ctx.budgets.path_nodes} (Budgets.path_nodes)",
            )


class PathJoin(Op):
    """left ⋈ (subject path{mod} object), mod in "*", "+", "?"."""

    def __init__(self, left: Op, subject: End, obj: End, mod: str, steps: Steps, nodes: Op) -> None:
        self.left, self.subject, self.object, self.mod, self.steps, self.nodes = left, subject, obj, mod, steps, nodes
        ends = {e.slot for e in (subject, obj) if e.slot is not None}
        self.maybe, self.certain = left.maybe | ends, left.certain | ends

    def children(self) -> list[Op]:
        return [self.left]

    def label(self) -> str:
        return f"PathJoin {self.subject} {self.mod} {self.object}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        block: list[Row] = []
        async with aclosing(self.left.run(ctx)) as batches:
            async for batch in batches:
                block += batch
                if len(block) >= ctx.budgets.block_size:
                    async for out in self._block(ctx, block, pacer):
                        yield out
                    block = []
        if block:
            async for out in self._block(ctx, block, pacer):
                yield out

    async def _block(self, ctx: QueryContext, rows: list[Row], pacer: Pacer) -> AsyncGenerator[Batch, None]:
        forward: set[str] = set()
        backward: set[str] = set()
        unbound: list[Row] = []
        for row in rows:
            s, o = self.subject.value(row), self.object.value(row)
            if s is not None:
                forward.add(s)
            elif o is not None:
                backward.add(o)
            else:
                unbound.append(row)
        reach_forward = await self.reach(ctx, forward, True, self.subject.slot is None)
        reach_backward = await self.reach(ctx, backward, False, self.object.slot is None)
        out: Batch = []
        for row in rows:
            s, o = self.subject.value(row), self.object.value(row)
            if s is not None:
                out += self._emit(row, reach_forward[s], o, self.object)
            elif o is not None:
                out += self._emit(row, reach_backward[o], None, self.subject)
            await pacer.tick()
        yield out
        for row in unbound:
            async for batch in self._everything(ctx, row, pacer):
                yield batch

    def _emit(self, row: Row, reached: set[str], target: str | None, end: End) -> Batch:
        if target is not None:
            return [self._bind(row, self.subject, self.object, target)] if target in reached else []
        return [self._bind(row, end, end, n) for n in reached]

    @staticmethod
    def _bind(row: Row, a: End, b: End, value: str) -> Row:
        cells = list(row)
        for end in (a, b):
            if end.slot is not None and cells[end.slot] is None:
                cells[end.slot] = value
        return tuple(cells)

    async def _everything(self, ctx: QueryContext, row: Row, pacer: Pacer) -> AsyncGenerator[Batch, None]:
        """Both ends unbound: from every start node (all nodes when zero steps count)."""
        subjects = await self.steps.all_pairs(ctx)
        if self.mod == "+":
            starts = subjects
        else:
            starts = []
            seen: set[str] = set()
            async with aclosing(self.nodes.run(ctx)) as batches:
                async for batch in batches:
                    for r in batch:
                        for term in (r[self.steps.a], r[self.steps.b]):  # subjects and objects: the graph's nodes
                            if term is not None and term not in seen:
                                seen.add(term)
                                starts.append(term)
                    if len(seen) > ctx.budgets.path_nodes:
                        self.steps.kept = len(seen) + self.steps.kept
                        self.steps._check(ctx)
        size = ctx.budgets.block_size
        same = self.subject.slot is not None and self.subject.slot == self.object.slot
        for i in range(0, len(starts), size):
            block = starts[i : i + size]
            reached = await self.reach(ctx, set(block), True, True)
            out: Batch = []
            for s in block:
                if same:
                    if s in reached[s]:
                        out.append(self._bind(row, self.subject, self.subject, s))
                    continue
                start = self._bind(row, self.subject, self.subject, s)
                out += [self._bind(start, self.object, self.object, n) for n in reached[s]]
            await pacer.tick(len(out) + len(block))
            yield out

    async def reach(self, ctx: QueryContext, starts: set[str], forward: bool, constant: bool) -> dict[str, set[str]]:
        """The nodes each start reaches (itself too when zero steps count: a
        `constant` of the query always, a value of a row if the graph has it)."""
        zero = self.mod in ("*", "?")
        reached: dict[str, set[str]] = {s: set() for s in starts}
        expanded: dict[str, set[str]] = {s: set() for s in starts}
        frontier: dict[str, set[str]] = {s: {s} for s in starts}
        known = self.steps.forward if forward else self.steps.backward
        levels = 0
        while any(frontier.values()):
            await self.steps.fetch(ctx, set().union(*frontier.values()), forward)
            levels += 1
            total = 0
            for s in starts:
                following: set[str] = set()
                for n in frontier[s]:
                    expanded[s].add(n)
                    for m in known.get(n, ()):
                        reached[s].add(m)
                        if m not in expanded[s]:
                            following.add(m)
                frontier[s] = following if self.mod != "?" else set()
                total += len(reached[s])
            if total > ctx.budgets.path_nodes:
                raise QueryError(
                    ErrorKind.BUDGET_EXCEEDED,
                    f"a property path visits more than {ctx.budgets.path_nodes} nodes (Budgets.path_nodes)",
                )
        if zero:
            unsure = {s for s in starts if not constant and s not in reached[s] and not known.get(s)}
            present = await self.steps.members(ctx, unsure) if unsure else set()
            for s in starts:
                if constant or s in present or s in reached[s] or known.get(s):
                    reached[s].add(s)
        return reached
