"""Server pieces: a server-fragment pattern sent as one query, its pages read into rows.

A `Source` is where a piece runs: the dataset's default graph or one of its
named graphs (each its own HDT file). When a query reads several sources,
their blank nodes are told apart by a label prefix per source (`_:s2_b1`
came from source 2 as `_:b1`); a blank node shipped back to a source (a
bind join's VALUES) goes as the IRI that names it there (`terms.skolem`),
and one from another source, which cannot occur in it, as one that names
nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field

from quanta.client.ops.base import Batch, Op, Shape
from quanta.client.plan.context import QueryContext
from quanta.client.transport import QueryError, SubRequest
from quanta.sparql.errors import ErrorKind
from quanta.sparql.term_rows import Row

FOREIGN = "_: foreign"  # a blank node label no HDT dictionary holds (labels have no spaces)


@dataclass
class Sources:
    """The sources a plan reads; labels are prefixed once it reads more than one."""

    by_graph: dict[str | None, Source] = field(default_factory=dict)
    rename: bool = False

    def get(self, graph: str | None) -> Source:
        source = self.by_graph.get(graph)
        if source is None:
            source = self.by_graph[graph] = Source(self, graph, f"s{len(self.by_graph)}_")
        return source

    def freeze(self) -> None:
        self.rename = len(self.by_graph) > 1


@dataclass(eq=False)
class Source:
    sources: Sources
    graph: str | None  # None: the default graph
    prefix: str

    def incoming(self, term: str | None) -> str | None:
        """A term of this source's results, as the query sees it."""
        if term is not None and self.sources.rename and term.startswith("_:"):
            return "_:" + self.prefix + term[2:]
        return term

    def outgoing(self, term: str | None) -> str | None:
        """A term the query holds, as this source knows it (for VALUES)."""
        if term is None or not self.sources.rename or not term.startswith("_:"):
            return term
        label = term[2:]
        return "_:" + label[len(self.prefix) :] if label.startswith(self.prefix) else FOREIGN

    def label(self) -> str:
        return "default graph" if self.graph is None else f"<{self.graph}>"


class Columns:
    """Reads a page's rows into full-width rows: each variable name to its slot."""

    def __init__(self, slots: dict[str, int], shape: Shape, source: Source) -> None:
        self.slots = slots
        self.shape = shape
        self.source = source

    def rows(self, variables: list[str], rows: list[Row]) -> Batch:
        positions = [(i, self.slots[v]) for i, v in enumerate(variables) if v in self.slots]
        incoming, width = self.source.incoming, self.shape.width
        out: Batch = []
        for values in rows:
            cells: list[str | None] = [None] * width
            for i, slot in positions:
                cells[slot] = incoming(values[i])
            out.append(tuple(cells))
        return out


async def fetch(
    ctx: QueryContext, source: Source, text: str, columns: Columns, partial: bool = False, whole: bool = False
) -> AsyncGenerator[Batch, None]:
    """Every page of one server query, as rows (stops sending when the consumer
    stops), in batches of `yield_rows` at most and about `batch_bytes` (the
    page's bytes shared evenly by its rows): a page may hold 100,000 rows, or
    a few of a million characters, and what comes after works batch by batch
    between turns of the event loop."""
    request = SubRequest(ctx.dataset, source.graph, text, partial=partial, whole=whole)
    budgets = ctx.budgets
    async for page in ctx.requester.pages(request):
        size = budgets.yield_rows
        if page.bytes > budgets.batch_bytes:
            size = max(1, min(size, len(page.rows) * budgets.batch_bytes // page.bytes))
        if len(page.rows) <= size:
            yield columns.rows(page.variables, page.rows)
            continue
        for start in range(0, len(page.rows), size):
            yield columns.rows(page.variables, page.rows[start : start + size])
            await asyncio.sleep(0)


@dataclass
class Piece:
    """A server-fragment pattern ready to send: `render(values)` is its query
    text with `values` (VALUES text shipped by a bind join, or "") joined in."""

    render: Callable[[str], str]
    columns: Columns
    maybe: frozenset[int]
    certain: frozenset[int]
    partial: bool = False  # a DISTINCT or COUNT(*) the server answers per quantum (SubRequest.partial)
    whole: bool = False  # the whole query, every operator on the server, or "unfinished" (SubRequest.whole)

    @property
    def source(self) -> Source:
        return self.columns.source


class Remote(Op):
    """A piece run as one server query."""

    def __init__(self, piece: Piece) -> None:
        self.piece = piece
        self.text = piece.render("")
        self.maybe = piece.maybe
        self.certain = piece.certain

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        piece = self.piece
        async for batch in fetch(ctx, piece.source, self.text, piece.columns, piece.partial, piece.whole):
            yield batch

    def label(self) -> str:
        whole = " whole" if self.piece.whole else ""
        return f"Remote[{self.piece.source.label()}]{whole} {self.text}"


# What a worker answers a query it does not run whole: the client runs it in pieces
NOT_WHOLE = frozenset({ErrorKind.UNFINISHED, ErrorKind.UNSUPPORTED_OPERATOR})


class Whole(Op):
    """The query run whole by a worker (`remote`: every operator there, suspended and resumed
    like any query, what they gathered in its saved plan), or, when the worker cannot run it
    whole (it holds more than a plan run whole may), its pieces: the query as the client plans
    it, planned then (`plan_pieces`: most queries sent whole need no plan of their own, which
    costs the gateway as much as the worker's compile). A plan run whole gathers before it
    answers, so its first rows come after anything that could stop it; the rows are held until
    the answer ends or passes `Budgets.memory_rows`, so that no row was handed on when the
    pieces start. `outcome(finished)` is told how it went (`plan.whole.WholeTries`)."""

    def __init__(
        self, remote: Remote, plan_pieces: Callable[[], Awaitable[Op]], outcome: Callable[[bool], None]
    ) -> None:
        self.remote, self.plan_pieces, self.outcome = remote, plan_pieces, outcome
        self.pieces: Op | None = None  # once planned
        self.maybe, self.certain = remote.maybe, remote.certain

    def children(self) -> list[Op]:
        return [self.remote] if self.pieces is None else [self.remote, self.pieces]

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        held: list[Batch] = []
        rows = 0
        answer = self.remote.run(ctx)
        try:
            async for batch in answer:
                held.append(batch)
                rows += len(batch)
                if rows > ctx.budgets.memory_rows:
                    break
        except QueryError as error:
            if error.kind not in NOT_WHOLE:
                raise
            self.outcome(False)
            self.pieces = await self.plan_pieces()
            async for batch in self.pieces.run(ctx):
                yield batch
            return
        self.outcome(True)
        for batch in held:
            yield batch
        async for batch in answer:  # a long answer goes on as it comes
            yield batch
