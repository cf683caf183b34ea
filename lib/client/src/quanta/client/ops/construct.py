"""CONSTRUCT and DESCRIBE: rows of three terms (subject, predicate, object).

CONSTRUCT instantiates its template for each solution (fresh blank nodes
per solution; a triple with an unbound variable or an invalid term is left
out). DESCRIBE gives each resource's concise bounded description: its
triples as subject, and those of the blank nodes they reach, asked in
blocks of resources. A graph is a set: triples are deduplicated within the
memory budget (beyond it a repeated triple may come out again, which
leaves the graph the same).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from quanta.client.ops.base import Batch, Op, Pacer
from quanta.client.plan.context import QueryContext
from quanta.sparql.syntax import BlankTerm, IriTerm, LiteralTerm, RdfTerm, Var
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import from_term

Triple = tuple[str, str, str]
Part = tuple[str, object]  # ("slot", int) | ("bnode", label) | ("term", str)


def template_part(node: RdfTerm, slot_of: Callable[[Var], int]) -> Part:
    if isinstance(node, Var):
        return ("slot", slot_of(node))
    if isinstance(node, BlankTerm):
        return ("bnode", str(node))
    return ("term", from_term(node))


def valid(s: str, p: str, o: str) -> bool:
    """RDF: the subject is an IRI or a blank node, the predicate an IRI."""
    return not s.startswith('"') and not p.startswith(('"', "_:")) and bool(o)


class Dedup:
    """Remembers up to `limit` triples."""

    def __init__(self, limit: int) -> None:
        self.seen: set[Triple] = set()
        self.limit = limit

    def new(self, triple: Triple) -> bool:
        if triple in self.seen:
            return False
        if len(self.seen) < self.limit:
            self.seen.add(triple)
        return True


class Construct(Op):
    def __init__(self, child: Op, template: list[tuple[Part, Part, Part]], bnode_prefix: str) -> None:
        self.child, self.template, self.prefix = child, template, bnode_prefix
        self.maybe = self.certain = frozenset({0, 1, 2})

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"Construct {len(self.template)} template triples"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        dedup = Dedup(ctx.budgets.memory_rows)
        async for batch in self.child.run(ctx):
            out: Batch = []
            for row in batch:
                solution = ctx.next_bnode()
                for parts in self.template:
                    terms = [self._term(part, row, solution) for part in parts]
                    s, p, o = terms
                    if s is None or p is None or o is None or not valid(s, p, o):
                        continue
                    if dedup.new((s, p, o)):
                        out.append((s, p, o))
            await pacer.tick(len(batch))
            yield out

    def _term(self, part: Part, row: Row, solution: int) -> str | None:
        kind, value = part
        if kind == "slot":
            assert isinstance(value, int)
            return row[value]
        if kind == "bnode":
            return f"_:{self.prefix}{solution}x{value}"
        assert isinstance(value, str)
        return value


# Makes the operator giving (subject, predicate, object) rows of a block of subjects.
Describer = Callable[[list[str]], Op]


class Describe(Op):
    """`child` gives the resources (every term of its rows); `describe`
    makes the request for a block of them."""

    def __init__(self, child: Op, resources: list[str], describe: Describer) -> None:
        self.child, self.resources, self.describe = child, resources, describe
        self.maybe = self.certain = frozenset({0, 1, 2})

    def children(self) -> list[Op]:
        return [self.child]

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        seen: set[str] = set()
        queue: list[str] = []
        for r in self.resources:
            if r not in seen:
                seen.add(r)
                queue.append(r)
        async with aclosing(self.child.run(ctx)) as batches:
            async for batch in batches:
                for row in batch:
                    for term in row:
                        if term is not None and not term.startswith('"') and term not in seen:
                            seen.add(term)
                            queue.append(term)
        dedup = Dedup(ctx.budgets.memory_rows)
        while queue:
            block, queue = queue[: ctx.budgets.block_size], queue[ctx.budgets.block_size :]
            async with aclosing(self.describe(block).run(ctx)) as triples:
                async for batch in triples:
                    out: Batch = []
                    for s, p, o in batch:
                        if s is None or p is None or o is None:
                            continue
                        if dedup.new((s, p, o)):
                            out.append((s, p, o))
                        if o.startswith("_:") and o not in seen:  # the description goes on through blank nodes
                            seen.add(o)
                            queue.append(o)
                    yield out


def constant(node: RdfTerm) -> str | None:
    return from_term(node) if isinstance(node, IriTerm | LiteralTerm) else None
