"""The aggregates (SPARQL 1.1 section 18.5.1), with the expression values of the server.

COUNT skips errors; SUM and AVG are errors if any value is (or is not a
number), and add floats and doubles exactly, rounding once (`expr_values.add_exactly`);
MIN and MAX use ORDER BY's order and skip errors; SAMPLE takes the first value;
GROUP_CONCAT joins string values (an error if one is not a literal). DISTINCT keeps each
value once (a set in the group's state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quanta.client.ops.expr import ClientExpr
from quanta.client.ops.order import term_key
from quanta.sparql.expr_values import (
    DECIMAL,
    DOUBLE,
    EXACT_SUMS,
    FLOAT,
    INTEGER,
    LANG,
    MAX_LITERAL_CHARS,
    STRING,
    XSD_STRING,
    ExprError,
    Lit,
    Sum,
    add_exactly,
    integer,
    make_literal,
    numeric,
    read_exact,
    read_sum,
    too_long,
)
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import literal, split_literal

NUMBERS = (INTEGER, DECIMAL, FLOAT, DOUBLE)


@dataclass
class Aggregate:
    kind: str  # Count, Sum, Avg, Min, Max, Sample, GroupConcat
    expr: ClientExpr | None  # None: COUNT(*)
    distinct: bool
    slot: int  # where the result goes
    separator: str = " "
    star: list[int] | None = None  # COUNT(DISTINCT *): the slots a solution is told apart by
    summed: bool = False  # SUM, AVG: a row's value is already the sum of the `times` rows it stands for

    def state(self) -> State:
        return State(self)


def _value(term: str) -> Lit | None:
    if not term.startswith('"'):
        return None
    lexical, lang, datatype = split_literal(term)
    return make_literal(lexical, lang, datatype)


def value_term(v: Lit) -> str:
    return literal(v.lex, v.lang, None if v.dt == XSD_STRING else v.dt)


class State:
    """One aggregate's state for one group. `size` grows with what it keeps
    (the group operator's memory account)."""

    __slots__ = ("agg", "chars", "count", "error", "parts", "seen", "size", "total", "value")

    def __init__(self, agg: Aggregate) -> None:
        self.agg = agg
        self.count = 0
        self.error = False
        self.value: str | None = None  # MIN, MAX, SAMPLE
        self.total: Sum | None = None  # SUM, AVG: the kind and value (`add_exactly`)
        self.parts: list[str] = []  # GROUP_CONCAT
        self.chars = 0  # GROUP_CONCAT's length so far: a literal like any other (MAX_LITERAL_CHARS)
        self.seen: set[Any] | None = set() if agg.distinct else None
        self.size = 0

    def add(self, row: Row, times: int = 1) -> None:
        """Add `row`, which stands for `times` equal rows (a partial answer's count)."""
        agg = self.agg
        if agg.expr is None:  # COUNT(*)
            if self.seen is not None:
                solution = row if agg.star is None else tuple(row[s] for s in agg.star)
                if solution in self.seen:
                    return
                self.seen.add(solution)
                self.size += 1
                times = 1
            self.count += times
            return
        term = agg.expr.value(row)
        if term is None:
            if agg.kind in ("Sum", "Avg", "GroupConcat"):
                self.error = True
            return
        if self.seen is not None:
            if term in self.seen:
                return
            self.seen.add(term)
            self.size += 1
            times = 1
        self.count += times
        kind = agg.kind
        if kind in ("Min", "Max"):
            if (
                self.value is None
                or (kind == "Min" and term_key(term) < term_key(self.value))
                or (kind == "Max" and term_key(self.value) < term_key(term))
            ):
                self.value = term
        elif kind == "Sample":
            if self.value is None:
                self.value = term
        elif kind in ("Sum", "Avg"):
            if self.error:
                return
            v = _value(term)
            try:
                if v is None:
                    raise ExprError("not a number")
                if v.kind in NUMBERS:
                    number_kind, number = v.kind, v.val  # a numeric literal's value
                elif agg.summed and v.dt in EXACT_SUMS:  # a worker's partial sum, exact
                    number_kind, number = EXACT_SUMS[v.dt], read_exact(v.lex)
                else:
                    raise ExprError("not a number")
                weighed = times != 1 and not agg.summed
                self.total = add_exactly(self.total, number_kind, number, times if weighed else 1)  # type: ignore[arg-type]
            except (ExprError, ArithmeticError, ValueError):
                self.error = True
        elif kind == "GroupConcat":
            v = _value(term)
            if v is None or v.kind not in (STRING, LANG):
                self.error = True
            else:
                self.chars += (len(v.lex) + len(agg.separator)) * times
                if self.chars > MAX_LITERAL_CHARS + len(agg.separator):
                    raise too_long("GROUP_CONCAT")
                self.parts += [v.lex] * times
                self.size += times

    def result(self) -> str | None:
        kind = self.agg.kind
        if kind == "Count":
            return value_term(integer(self.count))
        if self.error:
            return None
        if kind in ("Min", "Max", "Sample"):
            return self.value
        if kind == "Sum":
            return value_term(numeric(*read_sum(self.total))) if self.total is not None else value_term(integer(0))
        if kind == "Avg":
            if self.total is None:
                return value_term(integer(0))
            try:
                return value_term(numeric(*read_sum(self.total, self.count)))
            except (ExprError, ArithmeticError, ValueError):
                return None
        if kind == "GroupConcat":
            return literal(self.agg.separator.join(self.parts))
        raise ValueError(f"unknown aggregate {kind}")
