"""FILTER and BIND, and their expressions as the native core evaluates them.

A FILTER runs natively as comparisons of ids (`atom`) and a condition, a BIND
as a value, that the native core evaluates (`native_condition`: the functions
of `NATIVE_FUNCTIONS`, REGEX and REPLACE with a constant pattern the linear
engine runs, CAST to `NATIVE_CASTS`), reading terms outside the dictionary
from the plan's term table, which also numbers the values BINDs compute (the
native core writes each as the Python function would and interns it:
`TermTable.intern_outside`). What it does not decide exactly (decimal
arithmetic, an overflow, a relative IRI, a language tag past ASCII), and every
row of an expression it lacks (a REGEX or REPLACE whose pattern has
back-references or is not constant), the operator's Python function (`test`,
`value`: `quanta.sparql.expressions`) decides, for that row: a BIND's gives the
value its id in the plan's term table.
Both are stateless beyond their input (the paper's FILTER).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, Spec
from quanta.engine.operators.scan import Scan
from quanta.native._core import Regex
from quanta.sparql import expressions
from quanta.sparql.expr_values import MAX_LITERAL_CHARS, ExprError
from quanta.sparql.functions_regex import compile_regex, parse_replacement

REFERENCE = ("p",)  # a condition or value the Python function decides for every row


def _check_slots(expr: pb.Expr, ctx: Context) -> pb.Expr:
    if any(slot >= ctx.width for slot in expressions.variables(expr)):
        raise ValueError("expression refers to an undeclared variable")
    return expr


class Filter(Operator):
    __slots__ = ("condition", "input", "test")

    def __init__(self, ctx: Context, input: Operator, condition: pb.Expr) -> None:
        super().__init__(ctx)
        self.input = input
        self.condition = condition
        self.test = expressions.compile_test(condition, ctx.terms)

    def describe(self) -> pb.Operator:
        return pb.Operator(filter=pb.Filter(input=self.input.describe(), condition=self.condition))

    def spec(self) -> Spec:
        split = split_condition(self)
        atoms, condition = split if split is not None else ([], REFERENCE)
        return ("filter", self.input.spec(), atoms, condition, self.test)

    @classmethod
    def build(cls, msg: pb.Filter, ctx: Context) -> Filter:
        from quanta.engine.operators import build

        return cls(ctx, build(msg.input, ctx), _check_slots(msg.condition, ctx))

    def variables(self) -> set[int]:
        return self.input.variables()

    def sorted_on(self) -> int | None:
        return self.input.sorted_on()


class Extend(Operator):
    """BIND(expression AS ?slot). An evaluation error leaves the slot unbound.
    When the slot is already bound (by an outer join's bindings) the mapping
    passes only if the values agree: that is the join's compatibility."""

    __slots__ = ("expression", "input", "slot", "value")

    def __init__(self, ctx: Context, input: Operator, slot: int, expression: pb.Expr) -> None:
        super().__init__(ctx)
        self.input = input
        self.slot = slot
        self.expression = expression
        self.value = expressions.compile_value(expression, ctx.terms)

    def describe(self) -> pb.Operator:
        msg = pb.Extend(input=self.input.describe(), slot=self.slot, expression=self.expression)
        return pb.Operator(extend=msg)

    def spec(self) -> Spec:
        value = native_condition(self.expression, self.ctx) or REFERENCE
        return ("extend", self.input.spec(), self.slot, value, self.value)

    @classmethod
    def build(cls, msg: pb.Extend, ctx: Context) -> Extend:
        from quanta.engine.operators import build

        if msg.slot >= ctx.width:
            raise ValueError("BIND target is an undeclared variable")
        return cls(ctx, build(msg.input, ctx), msg.slot, _check_slots(msg.expression, ctx))

    def variables(self) -> set[int]:
        return self.input.variables() | {self.slot}

    def sorted_on(self) -> int | None:
        return self.input.sorted_on()


Atom = tuple[bool, tuple[bool, int], tuple[bool, int]]  # (same, (is slot, value), (is slot, value))
Tree = tuple[Any, ...]  # a condition or value as the native core reads it (`NativeHdt.pipeline`)
F = pb.Function


def split_condition(op: Filter) -> tuple[list[Atom], Tree | None] | None:
    """The filter's conjuncts as comparisons that term ids decide exactly
    (`atom`) and, for the others, one condition the native core evaluates;
    None if a conjunct is neither (the Python test decides every row)."""
    ctx = op.ctx
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
    F.FUNCTION_ENCODE_FOR_URI, F.FUNCTION_STRDT, F.FUNCTION_STRLANG, F.FUNCTION_SECONDS,
    F.FUNCTION_TIMEZONE, F.FUNCTION_MD5, F.FUNCTION_SHA1, F.FUNCTION_SHA256, F.FUNCTION_SHA384,
    F.FUNCTION_SHA512, F.FUNCTION_IRI, F.FUNCTION_BNODE,
})  # fmt: skip
# These build strings natively of up to 64 KiB (`CONCAT_BYTES` in src/expr.rs; a longer one is
# the Python function's, which fails the query past MAX_LITERAL_CHARS): a limit set below that
# leaves them to the Python function, whose error it is.
if MAX_LITERAL_CHARS < 1 << 16:
    NATIVE_FUNCTIONS -= {F.FUNCTION_CONCAT, F.FUNCTION_UCASE, F.FUNCTION_LCASE, F.FUNCTION_ENCODE_FOR_URI}
# CAST's targets the native core casts to (`cast` in src/expr.rs): their IRI is its second argument.
NATIVE_CASTS = frozenset(f"http://www.w3.org/2001/XMLSchema#{t}" for t in (
    "string", "integer", "decimal", "double", "float", "boolean", "dateTime",
))  # fmt: skip
FALSE_TERM = '"false"^^<http://www.w3.org/2001/XMLSchema#boolean>'


def native_condition(e: pb.Expr, ctx: Context) -> Tree | None:
    """The expression as the native core's tree (`NativeHdt.pipeline`),
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
    if f == F.FUNCTION_REPLACE:
        return _native_replace(args, ctx)
    cast = f == F.FUNCTION_CAST and e.call.iri in NATIVE_CASTS
    if f not in NATIVE_FUNCTIONS and not cast:
        return None
    trees = [native_condition(a, ctx) for a in args]
    if any(t is None for t in trees):
        return None
    if cast:  # the target datatype, an IRI
        trees.append(("t", e.call.iri, 0))
    elif f == F.FUNCTION_IRI:  # the query's base IRI, if any, a simple literal
        trees.append(("t", f'"{e.call.iri}"', 0))
    return ("c", f, trees)


def _constants(args: Sequence[pb.Expr], ctx: Context) -> list[str] | None:
    """The arguments' lexical forms, if each is a simple literal constant."""
    constants = [ctx.terms.string(a.term) if a.WhichOneof("kind") == "term" else "" for a in args]
    if not all(len(c) > 1 and c.startswith('"') and c.endswith('"') for c in constants):
        return None
    return [c[1:-1] for c in constants]


def _native_regex(args: Sequence[pb.Expr], ctx: Context) -> Tree | None:
    """REGEX with a constant pattern and flags on the linear-time engine."""
    constants = _constants(args[1:], ctx)
    if constants is None:
        return None
    compiled = compile_regex(constants[0], constants[1] if len(constants) > 1 else "")
    text = native_condition(args[0], ctx)
    if not isinstance(compiled, Regex) or text is None:
        return None
    return ("r", text, compiled)


def _native_replace(args: Sequence[pb.Expr], ctx: Context) -> Tree | None:
    """REPLACE with a constant pattern, replacement and flags on the
    linear-time engine, its parts parsed as `functions_regex.replace_with`
    does; a pattern or replacement that is an error on every row stays with
    the Python function. The native core builds results of at most
    MAX_LITERAL_CHARS bytes (so of at most as many characters) and leaves a
    longer one to the Python function, which builds it or fails the query."""
    if len(args) not in (3, 4):
        return None
    constants = _constants(args[1:], ctx)
    if constants is None:
        return None
    compiled = compile_regex(constants[0], constants[2] if len(constants) > 2 else "")
    text = native_condition(args[0], ctx)
    if not isinstance(compiled, Regex) or text is None or compiled.search(""):
        return None
    try:
        parts = parse_replacement(constants[1], compiled.groups)
    except ExprError:
        return None
    return ("x", text, compiled, parts, MAX_LITERAL_CHARS)
