"""FILTER and BIND on the client, with the server's semantics.

Expressions are compiled by `quanta.sparql.expressions` (the code the
workers run) over a term table of their own with no dictionary; a row's
terms are interned only for the slots the expression reads. The table
only grows, so it is replaced (and the expression compiled again) when it
holds many terms. What the server does not evaluate (EXISTS, RAND, UUID,
BNODE()...) has been turned into hidden variables by the planner: the
operators that bind those (`Generate`, `ExistsColumn`...) run first.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from quanta.client.ops.base import Batch, Op, Pacer, Shape, with_cell
from quanta.client.plan.context import QueryContext
from quanta.sparql import expressions
from quanta.sparql.expr_values import format_double
from quanta.sparql.syntax import RdfTerm, Var
from quanta.sparql.term_rows import Row
from quanta.sparql.term_table import TermTable
from quanta.sparql.terms import literal

XSD_DOUBLE = "http://www.w3.org/2001/XMLSchema#double"
TABLE_LIMIT = 100_000  # terms a table holds before it is replaced
TABLE_CHARS = 4 << 20  # or characters (a computed term may have a million: MAX_LITERAL_CHARS)
# Results kept per expression, by the values it reads: they repeat (a score, a price, a type),
# and the planner has turned what is not a function of them (RAND, UUID, BNODE) into hidden
# variables. Keys longer than MEMO_KEY_CHARS are not kept, so the memo holds at most a few MB.
MEMO_ENTRIES = 4096
MEMO_KEY_CHARS = 512


class _Scope:
    """What `expressions.to_proto` asks: slots of variables, ids of constants. At module level:
    a class made per compile is a reference cycle (its methods held the table), so a replaced
    table (megabytes of computed terms) waited for the cyclic collector."""

    def __init__(self, table: TermTable, slot_of: Callable[[Var], int | None]) -> None:
        self.table, self.slot_of = table, slot_of

    def slot(self, var: Var) -> int | None:
        return self.slot_of(var)

    def term(self, node: RdfTerm) -> int:
        return self.table.intern_node(node)


class ClientExpr:
    """An expression over rows of terms: `test(row)` (FILTER: its effective
    boolean value, an error is false) and `value(row)` (BIND: a term, None
    on an error)."""

    def __init__(self, expr: Any, slot_of: Callable[[Var], int | None], shape: Shape, base: str | None) -> None:
        self.expr, self.slot_of, self.shape, self.base = expr, slot_of, shape, base
        self._tests: dict[tuple[str | None, ...], bool] = {}
        self._values: dict[tuple[str | None, ...], str | None] = {}
        self._compile()

    def _compile(self) -> None:
        self.table = table = TermTable(None)
        proto = expressions.to_proto(self.expr, _Scope(table, self.slot_of), self.base)
        self.reads = sorted(expressions.variables(proto))
        self._test = expressions.compile_test(proto, table)
        self._value = expressions.compile_value(proto, table)

    def _mapping(self, row: Row) -> tuple[int, ...]:
        if len(self.table.extra) > TABLE_LIMIT or self.table.extra_chars > TABLE_CHARS:
            self._compile()
        ids = [0] * self.shape.width
        intern = self.table.intern
        for s in self.reads:
            term = row[s]
            if term is not None:
                ids[s] = intern(term)
        return tuple(ids)

    def test(self, row: Row) -> bool:
        key = tuple(row[s] for s in self.reads)
        passed = self._tests.get(key)
        if passed is None:
            mapping = self._mapping(row)  # first: it may replace the table, and the compiled expression with it
            passed = self._test(mapping)
            self._memo(self._tests, key, passed)
        return passed

    def value(self, row: Row) -> str | None:
        key = tuple(row[s] for s in self.reads)
        if key in self._values:
            return self._values[key]
        mapping = self._mapping(row)  # first, as in `test`
        gid = self._value(mapping)
        value = self.table.string(gid) if gid else None
        self._memo(self._values, key, value)
        return value

    @staticmethod
    def _memo(memo: dict[tuple[str | None, ...], Any], key: tuple[str | None, ...], result: Any) -> None:
        if sum(len(term) for term in key if term is not None) > MEMO_KEY_CHARS:
            return
        if len(memo) >= MEMO_ENTRIES:
            memo.clear()
        memo[key] = result


class Filter(Op):
    def __init__(self, child: Op, tests: list[ClientExpr]) -> None:
        self.child, self.tests = child, tests
        self.maybe, self.certain = child.maybe, child.certain

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"Filter {' && '.join(str(t.expr) for t in self.tests)}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        pacer = Pacer(ctx.budgets.yield_rows)
        tests = self.tests
        async for batch in self.child.run(ctx):
            out: Batch = []
            for row in batch:
                if all(t.test(row) for t in tests):
                    out.append(row)
                if pacer.due():  # a test's cost varies (a REGEX over a long literal): a slice of time
                    yield out
                    out = []
                    await pacer.rest()
            yield out


class Extend(Op):
    """BIND(expr AS ?var); an error leaves ?var unbound."""

    def __init__(self, child: Op, slot: int, expr: ClientExpr) -> None:
        self.child, self.slot, self.expr = child, slot, expr
        self.maybe, self.certain = child.maybe | {slot}, child.certain

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"Extend slot {self.slot} = {self.expr.expr}"

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        """The rows handed on once `batch_bytes` characters of values are built, or
        the Pacer is due: a row's value may be a million characters."""
        pacer, most = Pacer(ctx.budgets.yield_rows), ctx.budgets.batch_bytes
        slot, value = self.slot, self.expr.value
        async for batch in self.child.run(ctx):
            out: Batch = []
            built = 0
            for row in batch:
                term = value(row)
                out.append(with_cell(row, slot, term))
                if term is not None:
                    built += len(term)
                if pacer.due() or built >= most:
                    yield out
                    out, built = [], 0
                    await pacer.rest()
            yield out


class Generate(Op):
    """Hidden variables for what differs per call: RAND(), UUID(), STRUUID(),
    BNODE() (a fresh blank node per row), and an extension function (always
    an error: unbound)."""

    def __init__(self, child: Op, columns: list[tuple[int, str]], bnode_prefix: str) -> None:
        self.child, self.columns, self.bnode_prefix = child, columns, bnode_prefix
        made = {slot for slot, kind in columns if kind != "unbound"}
        self.maybe, self.certain = child.maybe | made, child.certain | made

    def children(self) -> list[Op]:
        return [self.child]

    def label(self) -> str:
        return f"Generate {self.columns}"

    def _value(self, ctx: QueryContext, kind: str) -> str | None:
        if kind == "RAND":
            return literal(format_double(random.random()), datatype=XSD_DOUBLE)
        if kind == "UUID":
            return f"urn:uuid:{uuid.uuid4()}"
        if kind == "STRUUID":
            return literal(str(uuid.uuid4()))
        if kind == "BNODE":
            return f"_:{self.bnode_prefix}{ctx.next_bnode()}"
        return None

    async def run(self, ctx: QueryContext) -> AsyncGenerator[Batch, None]:
        async for batch in self.child.run(ctx):
            out = []
            for row in batch:
                cells = list(row)
                for slot, kind in self.columns:
                    cells[slot] = self._value(ctx, kind)
                out.append(tuple(cells))
            yield out
