"""Native execution of a whole plan: the Python operators' tree, described to
`quanta.native.Pipeline` (`spec`), runs in Rust over the native store: scans,
index loop and merge joins, UNION, VALUES, OFFSET/LIMIT, FILTER and BIND.

A FILTER runs natively as comparisons of ids (`atom`) and a condition, a BIND
as a value, that the native core evaluates (`native_condition`: the functions
of `NATIVE_FUNCTIONS`, REGEX with a constant pattern). What it does not
decide exactly (decimal arithmetic, an overflow, a term outside the
dictionary; for a BIND, a value that is no term of the dictionary or the
query), and every row of an expression with a function it lacks, the Python
operator's own function decides, for that row: a BIND's gives the value its
id in the plan's term table.

The tree keeps its Python operators (`inner`) for what does not run: the
static description, and the reference the tests compare with. Rust runs the
iteration step for step as those operators would (same rows, same order,
same steps counted, same state, saved in their layout), for up to a batch of
rows at a time. A batch ends right after its last row, so a consumer that
takes every row leaves the native state exact; one that stops inside a batch
(a full page) is handled by rewinding to the batch's start and replaying the
rows it took.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from time import perf_counter
from typing import Any

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State
from quanta.engine.operators.expression import Extend, Filter
from quanta.engine.operators.joins import IndexJoin, MergeJoin
from quanta.engine.operators.scan import Scan
from quanta.engine.operators.slice import Slice
from quanta.engine.operators.union import Union
from quanta.engine.operators.values import Values
from quanta.engine.quantum import CHECK_EVERY, Quantum, QuantumExpired
from quanta.native._core import Regex
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.functions_regex import compile_regex
from quanta.sparql.term_table import Mapping, TermSaver

Demand = Callable[[], int | None]
Rows = Any  # quanta.native._core.Rows: rows of ids in one flat buffer, read as a sequence of tuples
FIRST_BATCH = 32  # rows; doubles up to MAX_BATCH within a quantum
MAX_BATCH = 4096
NATIVE_EXEC_ENV = "QUANTA_NATIVE_EXEC"  # "0": keep every operator in Python (for comparisons)
DONE, EXPIRED = 1, 2  # quanta.native._core.DONE / EXPIRED


class _Unlimited:
    """A quantum for replays: never expires."""

    __slots__ = ("budget", "overshoot")

    def __init__(self) -> None:
        self.budget = 1 << 62
        self.overshoot = 0.0

    def check(self) -> None:
        self.budget = 1 << 62


class NativeTree(Operator):
    __slots__ = ("batch", "demand", "fixed", "inner", "pending", "pipeline")

    def __init__(self, ctx: Context, inner: Operator, demand: Demand) -> None:
        super().__init__(ctx)
        self.inner = inner
        self.demand = demand  # at most how many rows the page still wants (None: no bound)
        self.batch = FIRST_BATCH
        self.fixed = len(ctx.terms.extra)  # the static plan's terms (`quanta.engine.plan.Plan.fixed_terms`)
        self.pipeline = ctx.store.hdt.pipeline(ctx.width, spec(inner, ctx))  # type: ignore[attr-defined]
        # while a batch is being handed out: [state before it, rows taken, rows in it, input mapping]
        self.pending: list | None = None  # type: ignore[type-arg]

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        for start, rows in self._runs(mu):
            self.pending = pending = [start, 0, len(rows), mu]
            for taken, row in enumerate(rows, 1):
                pending[1] = taken  # consumed before it is yielded, as every operator does
                yield row
            self.pending = None

    def rows(self) -> Rows:
        """An empty buffer for this plan's rows (`quanta.native._core.Rows`)."""
        return self.pipeline.rows()

    def batches(self, mu: Mapping, into: Rows) -> Iterator[None]:
        """Appends the rows to `into` a batch at a time, and yields after each, for a consumer
        that takes each batch whole (`execute.run`): no Python object and no step per row,
        and the native state stays exact."""
        for _ in self._runs(mu, into):
            yield

    def _runs(self, mu: Mapping, into: Rows | None = None) -> Iterator[tuple[list[int], Rows]]:
        """(state before the batch, the rows: a new buffer of the batch, or `into` with the
        batch appended), as long as the plan runs."""
        pipeline = self.pipeline
        quantum = self.ctx.quantum
        native_clock = type(quantum) is Quantum
        pipeline.restart()
        size = self.batch
        demand = self.demand
        while True:
            step = size  # what the demand leaves of it: a page that wants one row gets one, and grows again
            wanted = demand()
            if wanted is not None:
                step = max(1, min(size, wanted))
            start = pipeline.save()[0]
            before = len(into) if into is not None else 0
            left = quantum.deadline - perf_counter() if native_clock else None
            rows, status = pipeline.run(mu, step, quantum, QuantumExpired, left, CHECK_EVERY, into)
            if len(rows) > before:
                yield start, rows
            if status == EXPIRED:
                raise QuantumExpired
            if status == DONE:
                return
            size = min(size * 2, MAX_BATCH)

    def _settle(self) -> None:
        """If a consumer stopped inside a batch, move the native state back to
        just after the last row it took."""
        pending, self.pending = self.pending, None
        if pending is not None and pending[1] < pending[2]:
            start, taken, _, mu = pending
            self.pipeline.load(start)
            self.pipeline.run(mu, taken, _Unlimited(), QuantumExpired, float("inf"), CHECK_EVERY)

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        self._settle()
        self.pipeline.trim()  # the conditions' caches live for a quantum: a pooled plan keeps none
        values, foreign = self.pipeline.save()
        for i in foreign:  # computed terms, which the saver renumbers
            values[i] = saver.id(values[i])
        out += values

    def to_python(self) -> None:
        """The native state into the Python operators' attributes (to read it as theirs:
        `quanta.engine.progress`), through the saved layout both share."""
        terms = self.ctx.terms
        saver = terms.saver(self.fixed)
        state: list[int] = []
        self.save_state(state, saver)
        terms.restore_terms(self.fixed, saver.extra)
        self.inner.load_state(iter(state))

    def load_state(self, state: State) -> None:
        # checked natively; mappings' negative ids (renumbered in saved states) are mapped here
        self.pending = None
        self.pipeline.load(list(state), self.ctx.terms.restored)

    def reset(self) -> None:
        self.pending = None
        self.pipeline.reset()

    def describe(self) -> pb.Operator:
        return self.inner.describe()

    def variables(self) -> set[int]:
        return self.inner.variables()

    def sorted_on(self) -> int | None:
        return self.inner.sorted_on()


def native_execution(ctx: Context) -> bool:
    """Whether this plan's store runs chains natively."""
    return hasattr(ctx.store, "hdt") and hasattr(ctx.store.hdt, "pipeline") and os.environ.get(NATIVE_EXEC_ENV) != "0"


REFERENCE = ("p",)  # a condition or value the reference decides for every row
Spec = tuple[Any, ...]


def spec(op: Operator, ctx: Context) -> Spec:
    """The plan as `quanta.native._core.NativeHdt.pipeline` reads it."""
    if isinstance(op, Scan):
        return ("scan", op.pattern)
    if isinstance(op, Values):
        return ("values", op.slots, [v for row in op.rows for v in row], len(op.rows))
    if isinstance(op, Union):
        return ("union", [spec(b, ctx) for b in op.branches])
    if isinstance(op, IndexJoin):
        return ("join", spec(op.left, ctx), spec(op.right, ctx))
    if isinstance(op, MergeJoin):
        return ("merge", spec(op.left, ctx), op.right.pattern, op.key)
    if isinstance(op, Slice):
        return ("slice", spec(op.input, ctx), op.offset, op.limit)
    if isinstance(op, Extend):
        value = native_condition(op.expression, ctx) or REFERENCE
        return ("extend", spec(op.input, ctx), op.slot, value, op.value)
    if isinstance(op, Filter):
        split = split_condition(op, ctx)
        atoms, condition = split if split is not None else ([], REFERENCE)
        return ("filter", spec(op.input, ctx), atoms, condition, op.test)
    raise TypeError(f"no native operator for {type(op).__name__}")


Atom = tuple[bool, tuple[bool, int], tuple[bool, int]]  # (same, (is slot, value), (is slot, value))
Tree = tuple[Any, ...]  # a condition as the native core reads it (`Pipeline.add_condition`)
F = pb.Function


def split_condition(op: Filter, ctx: Context) -> tuple[list[Atom], Tree | None] | None:
    """The filter's conjuncts as comparisons that term ids decide exactly
    (`atom`) and, for the others, one condition the native core evaluates;
    None if a conjunct is neither (the filter stays in Python)."""
    subjects = set()
    stack = [op.input]
    while stack:
        node = stack.pop()
        if isinstance(node, Scan):
            subjects |= {code >> 1 for code in node.pattern[:2] if code & 1}
        stack += [getattr(node, a) for a in ("input", "left", "right") if hasattr(node, a)]
    atoms: list[Atom] = []
    trees: list[Tree] = []
    conjuncts = [op.condition]
    while conjuncts:
        e = conjuncts.pop(0)
        if e.WhichOneof("kind") == "call" and e.call.function == F.FUNCTION_AND:
            conjuncts[:0] = e.call.args
            continue
        a = atom(e, subjects, ctx)
        if a is not None:
            atoms.append(a)
            continue
        tree = native_condition(e, ctx)
        if tree is None:
            return None
        trees.append(tree)
    return atoms, (None if not trees else trees[0] if len(trees) == 1 else ("c", F.FUNCTION_AND, trees))


def atom(e: pb.Expr, subjects: set[int], ctx: Context) -> Atom | None:
    """`sameTerm(a, b)`, its negation, and `a = b`, `a != b` when one side
    cannot be a literal (an IRI or blank node constant, or a variable the
    chain binds in subject or predicate position: `subjects`; RDF term
    equality is then term identity). An unbound side makes an atom false, as
    the error it is makes a FILTER false."""

    def operand(e: pb.Expr) -> tuple[bool, int] | None:
        kind = e.WhichOneof("kind")
        if kind == "variable":
            return True, e.variable
        if kind == "term" and e.term:
            return False, e.term
        return None

    def not_literal(o: tuple[bool, int]) -> bool:
        is_slot, value = o
        return value in subjects if is_slot else not ctx.terms.string(value).startswith('"')

    if e.WhichOneof("kind") != "call":
        return None
    f, args = e.call.function, e.call.args
    if f == F.FUNCTION_NOT and len(args) == 1 and args[0].WhichOneof("kind") == "call":
        inner = args[0].call
        if inner.function == F.FUNCTION_SAME_TERM and len(inner.args) == 2:
            a, b = operand(inner.args[0]), operand(inner.args[1])
            return None if a is None or b is None else (False, a, b)
        return None
    if f in (F.FUNCTION_SAME_TERM, F.FUNCTION_EQ, F.FUNCTION_NE) and len(args) == 2:
        a, b = operand(args[0]), operand(args[1])
        if a is None or b is None:
            return None
        if f != F.FUNCTION_SAME_TERM and not (not_literal(a) or not_literal(b)):
            return None
        return (f != F.FUNCTION_NE, a, b)
    return None


NATIVE_FUNCTIONS = frozenset({
    F.FUNCTION_OR, F.FUNCTION_AND, F.FUNCTION_NOT, F.FUNCTION_EQ, F.FUNCTION_NE, F.FUNCTION_LT,
    F.FUNCTION_LE, F.FUNCTION_GT, F.FUNCTION_GE, F.FUNCTION_IN, F.FUNCTION_NOT_IN, F.FUNCTION_ADD,
    F.FUNCTION_SUB, F.FUNCTION_MUL, F.FUNCTION_DIV, F.FUNCTION_NEG, F.FUNCTION_POS, F.FUNCTION_IS_IRI,
    F.FUNCTION_IS_BLANK, F.FUNCTION_IS_LITERAL, F.FUNCTION_IS_NUMERIC, F.FUNCTION_STR, F.FUNCTION_LANG,
    F.FUNCTION_DATATYPE, F.FUNCTION_SAME_TERM, F.FUNCTION_LANG_MATCHES, F.FUNCTION_IF,
    F.FUNCTION_COALESCE, F.FUNCTION_STRLEN, F.FUNCTION_STRSTARTS, F.FUNCTION_STRENDS, F.FUNCTION_CONTAINS,
    F.FUNCTION_SUBSTR, F.FUNCTION_UCASE, F.FUNCTION_LCASE, F.FUNCTION_STRBEFORE, F.FUNCTION_STRAFTER,
    F.FUNCTION_CONCAT, F.FUNCTION_ABS, F.FUNCTION_ROUND, F.FUNCTION_CEIL, F.FUNCTION_FLOOR,
    F.FUNCTION_YEAR, F.FUNCTION_MONTH, F.FUNCTION_DAY, F.FUNCTION_HOURS, F.FUNCTION_MINUTES, F.FUNCTION_TZ,
    F.FUNCTION_ENCODE_FOR_URI, F.FUNCTION_STRDT, F.FUNCTION_STRLANG,
})  # fmt: skip
FALSE_TERM = '"false"^^<http://www.w3.org/2001/XMLSchema#boolean>'


def native_condition(e: pb.Expr, ctx: Context) -> Tree | None:
    """The expression as the native core's tree (`Pipeline.add_condition`),
    or None if it calls a function the native evaluator lacks."""
    kind = e.WhichOneof("kind")
    if kind == "variable":
        return ("v", e.variable)
    if kind == "term":
        return ("t", ctx.terms.string(e.term), e.term)
    if kind is None:  # a variable out of scope: an error
        return ("n",)
    f, args = e.call.function, e.call.args
    if f == F.FUNCTION_BOUND:
        inner = args[0].WhichOneof("kind")
        return ("b", args[0].variable) if inner == "variable" else ("t", FALSE_TERM, 0)
    if f == F.FUNCTION_REGEX:
        return _native_regex(args, ctx)
    if f not in NATIVE_FUNCTIONS:
        return None
    trees = [native_condition(a, ctx) for a in args]
    if any(t is None for t in trees):
        return None
    return ("c", f, trees)


def _native_regex(args: Sequence[pb.Expr], ctx: Context) -> Tree | None:
    """REGEX with a constant pattern and flags on the linear-time engine."""
    constants = [ctx.terms.string(a.term) if a.WhichOneof("kind") == "term" else "" for a in args[1:]]
    if not all(c.startswith('"') and c.endswith('"') for c in constants):  # simple literals only
        return None
    pattern, flags = constants[0][1:-1], constants[1][1:-1] if len(constants) > 1 else ""
    compiled = compile_regex(pattern, flags)
    text = native_condition(args[0], ctx)
    if not isinstance(compiled, Regex) or text is None:
        return None
    return ("r", text, compiled)


def nativize(op: Operator, ctx: Context) -> NativeTree:
    """The plan `op` roots, run natively; the page's demand bounds each batch."""
    return NativeTree(ctx, op, lambda: ctx.wanted())
