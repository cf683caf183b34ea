"""Native execution of a plan's hot subtree: a left-deep chain of a scan (or
VALUES, or a UNION of scans) and joins whose right sides are scans (index
loop joins, merge joins; an index loop join's may be a UNION of scans), with the FILTERs and BINDs between them, run by
`quanta.native.Pipeline` over the native store.

A FILTER runs natively as comparisons of ids (`atom`) and a condition, a BIND
as a value, that the native core evaluates (`native_condition`: the functions
of `NATIVE_FUNCTIONS`, REGEX with a constant pattern). What it does not
decide exactly (decimal arithmetic, an overflow, a term outside the
dictionary; for a BIND, a value that is no term of the dictionary or the
query) the Python operator's own function decides, for that row: a BIND's
gives the value its id in the plan's term table.

The chain keeps its Python operators (`inner`) for what does not run: the
static description, the saved state's layout and its validation. Rust runs
the iteration step for step as those operators would (same rows, same order,
same steps counted, same state), for up to a batch of rows at a time; the
state goes to and from the Python operators' attributes only when the plan is
loaded or saved. A batch ends right after its last row, so a consumer that
takes every row leaves the native state exact; one that stops inside a batch
(a full page, a Python operator above running out of time) is handled by
rewinding to the batch's start and replaying the rows it took.
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


class NativeChain(Operator):
    __slots__ = ("batch", "demand", "inner", "levels", "pending", "pipeline")

    def __init__(self, ctx: Context, inner: Operator, demand: Demand | None = None) -> None:
        super().__init__(ctx)
        self.inner = inner
        # demand: at most how many rows the operators above will pull (None: no
        # bound), so a batch never reads further than they would; None for the
        # left side of a Python join, which works (and counts steps) between two
        # of our rows: rows go one at a time there
        self.demand = demand
        self.batch = FIRST_BATCH if demand is not None else 1
        levels: list[Operator] = []
        posts: list[list[Filter | Extend]] = []  # each level's FILTERs and BINDs, from the top down
        above: list[Filter | Extend] = []
        op = inner
        while True:
            if isinstance(op, Filter | Extend):
                above.append(op)
                op = op.input
                continue
            if isinstance(op, IndexJoin):  # the right side's apply to the join's rows, below those above it
                above += _peel(op.right)[0]
            levels.append(op)
            posts.append(above)
            above = []
            if isinstance(op, Scan | Values) or _scans(op) is not None:
                break
            op = op.left  # type: ignore[attr-defined]
        levels.reverse()
        posts.reverse()
        self.levels = levels  # the base scan, then each join bottom up (filters and BINDs hold no state)
        joins = [_join_spec(j) for j in levels[1:]]
        base = levels[0]
        if isinstance(base, Scan):
            start: Any = base.pattern
        elif isinstance(base, Values):
            start = _values(base)
        else:
            start = [b.pattern for b in base.branches]  # type: ignore[attr-defined]
        self.pipeline = ctx.store.hdt.pipeline(ctx.width, start, joins)  # type: ignore[attr-defined]
        for level, ops in enumerate(posts):
            for post in reversed(ops):  # bottom up: a BIND's slot is bound for what is above it
                if isinstance(post, Extend):
                    tree = native_condition(post.expression, ctx)
                    self.pipeline.add_extend(level, post.slot, tree, post.value)
                    continue
                atoms, tree = split_condition(post, ctx)  # type: ignore[misc]
                if atoms:
                    self.pipeline.add_filter(level, atoms)
                if tree is not None:  # after the atoms: the Python test decides a whole row
                    self.pipeline.add_condition(level, tree, post.test)
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
        """An empty buffer for this chain's rows (`quanta.native._core.Rows`)."""
        return self.pipeline.rows()

    def batches(self, mu: Mapping, into: Rows) -> Iterator[None]:
        """Appends the rows to `into` a batch at a time, and yields after each, for a consumer
        that takes each batch whole (`execute.run` when the whole plan is this chain): no
        Python object and no step per row, and the native state stays exact."""
        for _ in self._runs(mu, into):
            yield

    def _runs(self, mu: Mapping, into: Rows | None = None) -> Iterator[tuple[list[int], Rows]]:
        """(state before the batch, the rows: a new buffer of the batch, or `into` with the
        batch appended), as long as the chain runs."""
        pipeline = self.pipeline
        quantum = self.ctx.quantum
        native_clock = type(quantum) is Quantum
        pipeline.restart()
        size = self.batch
        demand = self.demand
        while True:
            step = size  # what the demand leaves of it: a page that wants one row gets one, and grows again
            if demand is not None:
                wanted = demand()
                if wanted is not None:
                    step = max(1, min(size, wanted))
            start = pipeline.state()
            before = len(into) if into is not None else 0
            left = quantum.deadline - perf_counter() if native_clock else None
            rows, status = pipeline.run(mu, step, quantum, QuantumExpired, left, CHECK_EVERY, into)
            if len(rows) > before:
                yield start, rows
            if status == EXPIRED:
                raise QuantumExpired
            if status == DONE:
                return
            if size > 1:
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
        # the whole layout natively, unless a mapping holds a computed term
        # (which the saver renumbers): then through the Python operators
        if not self.pipeline.save_into(out, saver.fixed):
            self.to_python()
            self.inner.save_state(out, saver)

    def to_python(self) -> None:
        """The native state into the Python operators' attributes (for their saved layout,
        or to read it as theirs: `quanta.engine.progress`)."""
        state = self.pipeline.state()
        width = self.ctx.width
        i = _scans_to_python(self.levels[0], state, 0)
        for join in self.levels[1:]:
            current = tuple(state[i + 1 : i + 1 + width]) if state[i] else None
            join.current = current  # type: ignore[attr-defined]
            i += 1 + width
            if isinstance(join, MergeJoin):
                join.group_position, join.right.offset = state[i], state[i + 1]
                i += 2
                continue
            i = _scans_to_python(_peel(join.right)[1], state, i)  # type: ignore[attr-defined]

    def load_state(self, state: State) -> None:
        # parsed and checked natively; mappings holding terms outside the
        # dictionary (negative ids: renumbered in saved states) are mapped here
        self.pending = None
        foreign = self.pipeline.load_from(state, 0)
        if foreign is not None:
            restored = self.ctx.terms.restored
            self.pipeline.load([restored(v) if v < 0 else v for v in foreign])

    def reset(self) -> None:
        self.inner.reset()
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


def _values(op: Values) -> tuple[list[int], list[int], int]:
    """VALUES as the native chain's base: (slots, cells, rows)."""
    return op.slots, [v for row in op.rows for v in row], len(op.rows)


def _peel(op: Operator) -> tuple[list[Filter | Extend], Operator]:
    """An index join's right side: its FILTERs and BINDs from the top down, and what is below
    them (a scan, or a UNION of scans, in a chain). The join's rows are the right side's, so
    those apply to the join's rows (and keep no state)."""
    found: list[Filter | Extend] = []
    while isinstance(op, Filter | Extend):
        found.append(op)
        op = op.input
    return found, op


def _scans_to_python(op: Operator, state: list[int], i: int) -> int:
    """A scan's, VALUES' or UNION of scans' state from `state[i:]` into its attributes;
    where the next one starts."""
    if isinstance(op, Union):
        op.active = state[i]
        for branch in op.branches:
            branch.offset = state[i + 1]  # type: ignore[attr-defined]
            i += 1
        return i + 1
    if isinstance(op, Values):
        op.position = state[i]
    else:
        op.offset = state[i]  # type: ignore[attr-defined]
    return i + 1


def _scans(op: Operator) -> list[Scan] | None:
    """A UNION's branches when they are all scans (and there are some)."""
    if isinstance(op, Union) and op.branches and all(isinstance(b, Scan) for b in op.branches):
        return op.branches  # type: ignore[return-value]
    return None


def _join_spec(join: Operator) -> tuple[int, Any, int]:
    """A join of the chain as `Pipeline` takes it (see `quanta.native._core.NativeHdt.pipeline`)."""
    if isinstance(join, MergeJoin):
        return 1, join.right.pattern, join.key
    right = _peel(join.right)[1]  # type: ignore[attr-defined]
    scans = _scans(right)
    if scans is not None:
        return 2, [b.pattern for b in scans], 0
    return 0, right.pattern, 0  # type: ignore[attr-defined]


def _native(op: Filter | Extend, ctx: Context) -> bool:
    if isinstance(op, Extend):
        return native_condition(op.expression, ctx) is not None
    return split_condition(op, ctx) is not None


def chain_of(op: Operator, ctx: Context) -> bool:
    """A scan, VALUES or a UNION of scans, or a join of such a chain with a scan or a
    UNION of scans (under FILTERs and BINDs), or a FILTER or BIND of one, when the
    native core evaluates those."""
    if isinstance(op, Scan | Values) or _scans(op) is not None:
        return True
    if isinstance(op, IndexJoin):
        over, right = _peel(op.right)
        scans = isinstance(right, Scan) or _scans(right) is not None
        return scans and all(_native(r, ctx) for r in over) and chain_of(op.left, ctx)
    if isinstance(op, MergeJoin):
        return chain_of(op.left, ctx)
    if isinstance(op, Filter | Extend):
        return _native(op, ctx) and chain_of(op.input, ctx)
    return False


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


PAGE: Demand = lambda: None  # noqa: E731  (a marker: "the page's demand", looked up from ctx)


def nativize(op: Operator, ctx: Context, rerun: bool = False, demand: Demand | None = PAGE) -> Operator:
    """`op` with its largest native chains run natively. Parts that run again
    for every mapping of a Python join (`rerun`) stay in Python: there a
    chain is short and its per-run overhead would dominate. `demand` bounds
    the rows the operators above pull (the page's, narrowed by a slice; None
    below the left side of a Python join: one row at a time)."""
    if demand is PAGE:
        demand = ctx_wanted(ctx)
    if not rerun and chain_of(op, ctx):
        return NativeChain(ctx, op, demand)
    if isinstance(op, IndexJoin):
        op.left = nativize(op.left, ctx, rerun, None)
        op.right = nativize(op.right, ctx, True, demand)
    elif isinstance(op, MergeJoin):
        op.left = nativize(op.left, ctx, rerun, None)
    elif isinstance(op, Slice):
        op.input = nativize(op.input, ctx, rerun, None if demand is None else sliced(op, demand))
    elif hasattr(op, "input"):
        op.input = nativize(op.input, ctx, rerun, demand)
    elif hasattr(op, "branches"):
        op.branches = [nativize(b, ctx, rerun, demand) for b in op.branches]
    return op


def ctx_wanted(ctx: Context) -> Demand:
    return lambda: ctx.wanted()


def sliced(op: Slice, above: Demand) -> Demand:
    """A slice pulls what it skips and at most what it still emits."""

    def demand() -> int | None:
        wanted, remaining = above(), op.remaining
        if remaining is not None:
            wanted = remaining if wanted is None else min(wanted, remaining)
        return None if wanted is None else op.skip + wanted

    return demand
