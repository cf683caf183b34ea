"""Compiling a protobuf expression into closures, once per plan load.

Each node becomes a value closure and a test closure (its effective boolean
value), built in the form the operator computes natively. Inside them an
error (unbound variable, type error, ...) is None, so errors travel as values
and `||`, `&&`, IF, COALESCE and IN can apply SPARQL's rules to them.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable

from quanta.plan.v1 import plan_pb2
from quanta.sparql.errors import InvalidPlan
from quanta.sparql.expr_values import (
    FALSE,
    LANG,
    STRING,
    TRUE,
    Blank,
    ExprError,
    Iri,
    Lit,
    Value,
    arithmetic,
    compare,
    ebv,
    equal,
    make_literal,
    negate,
    plus,
)
from quanta.sparql.functions import STRICT, iri
from quanta.sparql.functions_casts import CASTS
from quanta.sparql.functions_regex import regex, regex_of, replace, replace_with
from quanta.sparql.syntax import BlankTerm, IriTerm, LiteralTerm, RdfTerm
from quanta.sparql.term_table import IdMapping, TermTable

F = plan_pb2.Function
Eval = Callable[[IdMapping], Value | None]
Test = Callable[[IdMapping], bool | None]
_ERRORS = (ExprError, ArithmeticError, ValueError)


class _Node:
    """A compiled expression, as a value and as a test (its effective boolean
    value): each operator builds the form it computes natively."""

    __slots__ = ("constant", "test", "value")

    def __init__(self, value: Eval, test: Test, constant: bool = False) -> None:
        self.value = value
        self.test = test
        self.constant = constant

    @classmethod
    def of_value(cls, value: Eval) -> _Node:
        return cls(value, lambda mu: ebv(value(mu)))

    @classmethod
    def of_test(cls, test: Test) -> _Node:
        def value(mu: IdMapping) -> Value | None:
            r = test(mu)
            return None if r is None else (TRUE if r else FALSE)

        return cls(value, test)

    @classmethod
    def of_constant(cls, v: Value | None) -> _Node:
        result = ebv(v)
        return cls(lambda mu: v, lambda mu: result, constant=True)


class _Decoder:
    """Term ids to values and back, shared by the expressions of one term table."""

    LIMIT = 200_000

    def __init__(self, terms: TermTable) -> None:
        # Weakly: `_decoders` holds this decoder while its table lives, and a strong reference
        # back made every table immortal (a client-side BIND's replaced tables, megabytes of
        # computed terms each, stayed for good). The table's expressions hold the table.
        self.terms: TermTable = weakref.proxy(terms)
        self.values: dict[int, Value] = {}
        self.ids: dict[tuple[str, ...], int] = {}

    def decode(self, gid: int) -> Value:
        v = self.values.get(gid)
        if v is None:
            v = _from_node(self.terms.node(gid), gid)
            if len(self.values) < self.LIMIT:
                self.values[gid] = v
        return v

    def intern(self, v: Value) -> int:
        """The id of a computed value (values are shared between term tables,
        TRUE and FALSE for one, so the id is kept here, not on the value)."""
        if type(v) is Lit:
            key: tuple[str, ...] = (v.lex, v.lang or "", v.dt)
        elif type(v) is Iri:
            key = (v.value,)
        else:
            key = ("_:", v.label)  # type: ignore[union-attr]
        gid = self.ids.get(key)
        if gid is None:
            gid = self.terms.intern_node(_to_node(v))
            if len(self.ids) < self.LIMIT:
                self.ids[key] = gid
        return gid


_decoders: weakref.WeakKeyDictionary[TermTable, _Decoder] = weakref.WeakKeyDictionary()


def _from_node(node: RdfTerm, gid: int = 0) -> Value:
    if isinstance(node, LiteralTerm):
        dt = str(node.datatype) if node.datatype is not None else None
        return make_literal(str(node), node.language, dt, gid)
    if isinstance(node, BlankTerm):
        return Blank(str(node), gid)
    return Iri(str(node), gid)


def _to_node(v: Value) -> RdfTerm:
    """A computed value as a term; the native core writes BIND values the same way
    (`Val::term_text`, lib/native/src/expr.rs), so a term has one id whichever computed it."""
    if type(v) is Lit:
        if v.lang:
            return LiteralTerm(v.lex, language=v.lang)
        return LiteralTerm(v.lex, datatype=v.dt)
    if type(v) is Iri:
        return IriTerm(v.value)
    return BlankTerm(v.label)  # type: ignore[union-attr]


class ExpressionCompiler:
    """Builds the closures of one expression. A call whose arguments are all
    constants is evaluated here, once (every function but BNODE depends on
    its arguments alone)."""

    def __init__(self, terms: TermTable) -> None:
        self.terms = terms
        decoder = _decoders.get(terms)
        if decoder is None:
            decoder = _decoders[terms] = _Decoder(terms)
        self.decoder: _Decoder = decoder

    def compile(self, expr: plan_pb2.Expr) -> _Node:
        kind = expr.WhichOneof("kind")
        if kind == "variable":
            return _Node.of_value(self._variable(expr.variable))
        if kind == "term":
            if expr.term == 0:
                raise InvalidPlan("term id 0 in an expression")
            return _Node.of_constant(self.decoder.decode(expr.term))
        if kind is None:  # a variable out of scope: always unbound
            return _Node.of_constant(None)
        call = expr.call
        if call.function == F.FUNCTION_BOUND:
            return _bound(call)
        args = [self.compile(a) for a in call.args]
        builder = _BUILDERS.get(call.function)
        if builder is None:
            raise InvalidPlan(f"unknown function {call.function}")
        node = builder(self, call, args)
        if not node.constant and call.function != F.FUNCTION_BNODE and all(a.constant for a in args):
            return _Node.of_constant(node.value(()))
        return node

    def _variable(self, slot: int) -> Eval:
        cache, decode = self.decoder.values, self.decoder.decode

        def run(mu: IdMapping) -> Value | None:
            gid = mu[slot]
            if not gid:
                return None
            v = cache.get(gid)
            return v if v is not None else decode(gid)

        return run


def _arity(call: plan_pb2.Call, low: int, high: int | None = None) -> None:
    n = len(call.args)
    if n < low or n > (low if high is None else high):
        raise InvalidPlan(f"{F.Name(call.function)} with {n} arguments")


def _strict(impl: Callable[..., Value], args: list[Eval]) -> Eval:
    """A function of its arguments' values; an error in any argument is the result."""
    if len(args) == 1:
        (a,) = args

        def run1(mu: IdMapping) -> Value | None:
            x = a(mu)
            if x is None:
                return None
            try:
                return impl(x)
            except _ERRORS:
                return None

        return run1
    if len(args) == 2:
        a, b = args

        def run2(mu: IdMapping) -> Value | None:
            x = a(mu)
            if x is None:
                return None
            y = b(mu)
            if y is None:
                return None
            try:
                return impl(x, y)
            except _ERRORS:
                return None

        return run2

    def run(mu: IdMapping) -> Value | None:
        values = []
        for f in args:
            x = f(mu)
            if x is None:
                return None
            values.append(x)
        try:
            return impl(*values)
        except _ERRORS:
            return None

    return run


Builder = Callable[[ExpressionCompiler, plan_pb2.Call, list[_Node]], _Node]


def _function(impl: Callable[..., Value], low: int, high: int | None = None, boolean: bool = False) -> Builder:
    def build(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, low, high)
        evaluate = _strict(impl, [a.value for a in args])
        if not boolean:
            return _Node.of_value(evaluate)

        def test(mu: IdMapping) -> bool | None:
            v = evaluate(mu)
            return None if v is None else v.val is True  # type: ignore[union-attr]

        return _Node(evaluate, test)

    return build


def _iri(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    """IRI()/URI(); `call.iri` holds the query's base IRI, if any."""
    _arity(call, 1)
    base = call.iri
    return _Node.of_value(_strict(lambda v: iri(v, base), [args[0].value]))


def _cast(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 1)
    impl = CASTS.get(call.iri)
    if impl is None:
        raise InvalidPlan(f"cast to <{call.iri}>")
    return _Node.of_value(_strict(impl, [args[0].value]))


def _logical(conjunction: bool) -> Builder:
    """|| and && (17.2): an error loses to an operand that decides the result."""

    def build(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        tests = [a.test for a in args]
        decisive = not conjunction  # true decides ||, false decides &&

        def run(mu: IdMapping) -> bool | None:
            error = False
            for t in tests:
                r = t(mu)
                if r is None:
                    error = True
                elif r is decisive:
                    return decisive
            return None if error else conjunction

        return _Node.of_test(run)

    return build


def _not(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 1)
    test = args[0].test

    def run(mu: IdMapping) -> bool | None:
        r = test(mu)
        return None if r is None else not r

    return _Node.of_test(run)


def _binary_test(decide: Callable[[Value, Value], bool | None]) -> Builder:
    """A test of two values: an error in either operand is the result."""

    def build(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, 2)
        a, b = args[0].value, args[1].value

        def run(mu: IdMapping) -> bool | None:
            x = a(mu)
            if x is None:
                return None
            y = b(mu)
            if y is None:
                return None
            return decide(x, y)

        return _Node.of_test(run)

    return build


def _equality(negated: bool) -> Builder:
    def decide(x: Value, y: Value) -> bool | None:
        r = equal(x, y)
        return None if r is None else r is not negated

    return _binary_test(decide)


def _ordering(accepted: frozenset[int]) -> Builder:
    """< <= > >=: `accepted` orders; a NaN operand (UNORDERED) accepts none."""

    def decide(x: Value, y: Value) -> bool | None:
        order = compare(x, y)
        return None if order is None else order in accepted

    return _binary_test(decide)


def _membership(negated: bool) -> Builder:
    """IN is `A = l1 || A = l2 ...`, NOT IN `A != l1 && A != l2 ...` (17.4.1.9-10)."""

    def build(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, 1, 1 << 30)
        needle = args[0].value
        options = [a.value for a in args[1:]]
        if not options:
            return _Node.of_constant(TRUE if negated else FALSE)

        def run(mu: IdMapping) -> bool | None:
            x = needle(mu)
            if x is None:
                return None
            error = False
            for option in options:
                y = option(mu)
                r = None if y is None else equal(x, y)
                if r is None:
                    error = True
                elif r:
                    return not negated
            return None if error else negated

        return _Node.of_test(run)

    return build


def _bound(call: plan_pb2.Call) -> _Node:
    _arity(call, 1)
    kind = call.args[0].WhichOneof("kind")
    if kind is None:  # out of scope
        return _Node.of_constant(FALSE)
    if kind != "variable":
        raise InvalidPlan("BOUND of a non-variable")
    slot = call.args[0].variable
    return _Node.of_test(lambda mu: mu[slot] != 0)


def _if(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 3)
    condition, then, otherwise = args[0].test, args[1].value, args[2].value

    def run(mu: IdMapping) -> Value | None:
        c = condition(mu)
        if c is None:
            return None
        return then(mu) if c else otherwise(mu)

    return _Node.of_value(run)


def _coalesce(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    options = [a.value for a in args]

    def run(mu: IdMapping) -> Value | None:
        for f in options:
            v = f(mu)
            if v is not None:
                return v
        return None

    return _Node.of_value(run)


# Labels of the blank nodes BNODE(str) makes (data labels never look like this).
BNODE_PREFIX = "sparql-bnode-"
_MADE = "_:" + BNODE_PREFIX


def _bnode(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    """BNODE(str): the same node for the same string within one solution, a
    different one across solutions. The label digests the string and the
    solution's terms (not their ids, which a saved plan renumbers), so every
    quantum of a query agrees. Nodes BNODE made are left out of the digest:
    in SELECT (BNODE(?s) AS ?b1) (BNODE(?s) AS ?b2), ?b1 is bound when ?b2
    is computed, yet both belong to one solution. The native core makes the
    same labels (`Eval::bnode`, lib/native/src/expr.rs): a saved plan
    resumes across the two."""
    _arity(call, 1)
    arg, text = args[0].value, compiler.terms.string

    def run(mu: IdMapping) -> Value | None:
        v = arg(mu)
        if type(v) is not Lit or v.kind != STRING:
            return None
        digest = hashlib.sha1(v.lex.encode())
        for gid in mu:
            term = text(gid) if gid else ""
            digest.update(b"\0" + (b"" if term.startswith(_MADE) else term.encode()))
        return Blank(BNODE_PREFIX + digest.hexdigest()[:32])

    return _Node.of_value(run)


def _regex(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    """With a constant pattern and flags the pattern is compiled once, here."""
    _arity(call, 2, 3)
    if not all(a.constant for a in args[1:]):
        return _function(regex, 2, 3, boolean=True)(compiler, call, args)
    text = args[0].value
    flags = args[2].value(()) if len(args) > 2 else None
    try:
        search = regex_of(args[1].value(()), flags).search  # type: ignore[arg-type]
    except ExprError:
        return _Node.of_constant(None)

    def test(mu: IdMapping) -> bool | None:
        v = text(mu)
        if type(v) is not Lit or not (v.kind == STRING or v.kind == LANG):
            return None
        return search(v.lex)

    return _Node.of_test(test)


def _replace(compiler: ExpressionCompiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 3, 4)
    if not all(a.constant for a in args[1:]):
        return _function(replace, 3, 4)(compiler, call, args)
    pattern, replacement = args[1].value(()), args[2].value(())
    flags = args[3].value(()) if len(args) > 3 else None
    try:
        if type(replacement) is not Lit or replacement.kind != STRING:
            raise ExprError("the replacement must be a simple literal")
        run = replace_with(regex_of(pattern, flags), replacement.lex)  # type: ignore[arg-type]
    except ExprError:
        return _Node.of_constant(None)
    return _Node.of_value(_strict(run, [args[0].value]))


def _arithmetic(op: str) -> Builder:
    def impl(a: Value, b: Value) -> Lit:
        return arithmetic(op, a, b)

    return _function(impl, 2)


_BOOLEAN_FUNCTIONS = {
    F.FUNCTION_IS_IRI,
    F.FUNCTION_IS_BLANK,
    F.FUNCTION_IS_LITERAL,
    F.FUNCTION_IS_NUMERIC,
    F.FUNCTION_SAME_TERM,
    F.FUNCTION_LANG_MATCHES,
    F.FUNCTION_STRSTARTS,
    F.FUNCTION_STRENDS,
    F.FUNCTION_CONTAINS,
}

_BUILDERS: dict[int, Builder] = {
    **{
        function: _function(impl, low, high, boolean=function in _BOOLEAN_FUNCTIONS)
        for function, (impl, low, high) in STRICT.items()
    },
    F.FUNCTION_OR: _logical(conjunction=False),
    F.FUNCTION_AND: _logical(conjunction=True),
    F.FUNCTION_NOT: _not,
    F.FUNCTION_EQ: _equality(negated=False),
    F.FUNCTION_NE: _equality(negated=True),
    F.FUNCTION_LT: _ordering(frozenset([-1])),
    F.FUNCTION_LE: _ordering(frozenset([-1, 0])),
    F.FUNCTION_GT: _ordering(frozenset([1])),
    F.FUNCTION_GE: _ordering(frozenset([0, 1])),
    F.FUNCTION_IN: _membership(negated=False),
    F.FUNCTION_NOT_IN: _membership(negated=True),
    F.FUNCTION_ADD: _arithmetic("+"),
    F.FUNCTION_SUB: _arithmetic("-"),
    F.FUNCTION_MUL: _arithmetic("*"),
    F.FUNCTION_DIV: _arithmetic("/"),
    F.FUNCTION_NEG: _function(negate, 1),
    F.FUNCTION_POS: _function(plus, 1),
    F.FUNCTION_IRI: _iri,
    F.FUNCTION_CAST: _cast,
    F.FUNCTION_IF: _if,
    F.FUNCTION_COALESCE: _coalesce,
    F.FUNCTION_BNODE: _bnode,
    F.FUNCTION_REGEX: _regex,
    F.FUNCTION_REPLACE: _replace,
}
