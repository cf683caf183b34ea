"""FILTER and BIND expressions: rdflib algebra -> protobuf -> Python closures.

A plan stores its expressions as `plan_pb2.Expr` trees over term ids, so a
suspended query carries them in a few bytes. When a plan is loaded, each tree
is compiled once into nested closures; evaluating a mapping then only decodes
the ids it reads (cached per term table) and applies the operators.

Inside the closures an error (unbound variable, type error, ...) is None,
so errors travel as values and `||`, `&&`, IF, COALESCE and IN can apply
SPARQL's rules to them.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rdflib.term import BNode, Literal, Node, URIRef, Variable

from quanta.engine.context import Mapping, TermTable
from quanta.engine.errors import InvalidPlan, UnsupportedQuery
from quanta.engine.sparql.expr_values import (
    FALSE,
    LANG,
    STRING,
    TRUE,
    XSD_STRING,
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
from quanta.engine.sparql.functions import CASTS, STRICT, regex, regex_of, replace, replace_with
from quanta.plan.v1 import plan_pb2

F = plan_pb2.Function
RDF_NIL = URIRef("http://www.w3.org/1999/02/22-rdf-syntax-ns#nil")

Eval = Callable[[Mapping], Value | None]
Test = Callable[[Mapping], bool | None]
_ERRORS = (ExprError, ArithmeticError, ValueError)


class ExprScope(Protocol):
    def slot(self, var: Variable) -> int | None:
        """The variable's slot; None if it is not in scope (it is then unbound)."""
        ...

    def term(self, node: Node) -> int:
        """The term id of a constant (never 0)."""
        ...


# -- rdflib algebra -> protobuf --

_OPERATORS = {
    "=": F.FUNCTION_EQ,
    "!=": F.FUNCTION_NE,
    "<": F.FUNCTION_LT,
    "<=": F.FUNCTION_LE,
    ">": F.FUNCTION_GT,
    ">=": F.FUNCTION_GE,
    "IN": F.FUNCTION_IN,
    "NOT IN": F.FUNCTION_NOT_IN,
    "+": F.FUNCTION_ADD,
    "-": F.FUNCTION_SUB,
    "*": F.FUNCTION_MUL,
    "/": F.FUNCTION_DIV,
}

# Builtin_* node -> (function, its parameter names; a trailing "?" is optional)
_BUILTINS: dict[str, tuple[int, tuple[str, ...]]] = {
    "BOUND": (F.FUNCTION_BOUND, ("arg",)),
    "isIRI": (F.FUNCTION_IS_IRI, ("arg",)),
    "isURI": (F.FUNCTION_IS_IRI, ("arg",)),
    "isBLANK": (F.FUNCTION_IS_BLANK, ("arg",)),
    "isLITERAL": (F.FUNCTION_IS_LITERAL, ("arg",)),
    "isNUMERIC": (F.FUNCTION_IS_NUMERIC, ("arg",)),
    "STR": (F.FUNCTION_STR, ("arg",)),
    "LANG": (F.FUNCTION_LANG, ("arg",)),
    "DATATYPE": (F.FUNCTION_DATATYPE, ("arg",)),
    "IRI": (F.FUNCTION_IRI, ("arg",)),
    "URI": (F.FUNCTION_IRI, ("arg",)),
    "BNODE": (F.FUNCTION_BNODE, ("arg",)),
    "STRDT": (F.FUNCTION_STRDT, ("arg1", "arg2")),
    "STRLANG": (F.FUNCTION_STRLANG, ("arg1", "arg2")),
    "sameTerm": (F.FUNCTION_SAME_TERM, ("arg1", "arg2")),
    "LANGMATCHES": (F.FUNCTION_LANG_MATCHES, ("arg1", "arg2")),
    "IF": (F.FUNCTION_IF, ("arg1", "arg2", "arg3")),
    "STRLEN": (F.FUNCTION_STRLEN, ("arg",)),
    "SUBSTR": (F.FUNCTION_SUBSTR, ("arg", "start", "length?")),
    "UCASE": (F.FUNCTION_UCASE, ("arg",)),
    "LCASE": (F.FUNCTION_LCASE, ("arg",)),
    "STRSTARTS": (F.FUNCTION_STRSTARTS, ("arg1", "arg2")),
    "STRENDS": (F.FUNCTION_STRENDS, ("arg1", "arg2")),
    "CONTAINS": (F.FUNCTION_CONTAINS, ("arg1", "arg2")),
    "STRBEFORE": (F.FUNCTION_STRBEFORE, ("arg1", "arg2")),
    "STRAFTER": (F.FUNCTION_STRAFTER, ("arg1", "arg2")),
    "ENCODE_FOR_URI": (F.FUNCTION_ENCODE_FOR_URI, ("arg",)),
    "REGEX": (F.FUNCTION_REGEX, ("text", "pattern", "flags?")),
    "REPLACE": (F.FUNCTION_REPLACE, ("arg", "pattern", "replacement", "flags?")),
    "ABS": (F.FUNCTION_ABS, ("arg",)),
    "ROUND": (F.FUNCTION_ROUND, ("arg",)),
    "CEIL": (F.FUNCTION_CEIL, ("arg",)),
    "FLOOR": (F.FUNCTION_FLOOR, ("arg",)),
    "YEAR": (F.FUNCTION_YEAR, ("arg",)),
    "MONTH": (F.FUNCTION_MONTH, ("arg",)),
    "DAY": (F.FUNCTION_DAY, ("arg",)),
    "HOURS": (F.FUNCTION_HOURS, ("arg",)),
    "MINUTES": (F.FUNCTION_MINUTES, ("arg",)),
    "SECONDS": (F.FUNCTION_SECONDS, ("arg",)),
    "TIMEZONE": (F.FUNCTION_TIMEZONE, ("arg",)),
    "TZ": (F.FUNCTION_TZ, ("arg",)),
    "MD5": (F.FUNCTION_MD5, ("arg",)),
    "SHA1": (F.FUNCTION_SHA1, ("arg",)),
    "SHA256": (F.FUNCTION_SHA256, ("arg",)),
    "SHA384": (F.FUNCTION_SHA384, ("arg",)),
    "SHA512": (F.FUNCTION_SHA512, ("arg",)),
}
_LISTS = {"CONCAT": F.FUNCTION_CONCAT, "COALESCE": F.FUNCTION_COALESCE}
# Different answers in different quanta of one query: the client runs them.
_NON_DETERMINISTIC = {"NOW", "RAND", "UUID", "STRUUID"}
_AGGREGATES = {"GroupConcat": "GROUP_CONCAT"}


def to_proto(expr: Any, scope: ExprScope) -> plan_pb2.Expr:
    """Translate an rdflib algebra expression into a protobuf Expr tree."""
    if isinstance(expr, Variable):
        slot = scope.slot(expr)
        return plan_pb2.Expr() if slot is None else plan_pb2.Expr(variable=slot)
    if isinstance(expr, URIRef | Literal | BNode):
        return plan_pb2.Expr(term=scope.term(expr))
    name = getattr(expr, "name", None)
    if not isinstance(name, str):
        raise UnsupportedQuery("expression", repr(expr))

    def call(function: int, args: Iterable[Any], iri: str = "") -> plan_pb2.Expr:
        return plan_pb2.Expr(call=plan_pb2.Call(function=function, args=[to_proto(a, scope) for a in args], iri=iri))

    if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
        function = F.FUNCTION_OR if name == "ConditionalOrExpression" else F.FUNCTION_AND
        return call(function, [expr.expr, *(expr.other or ())])
    if name == "RelationalExpression":
        if expr.op in ("IN", "NOT IN"):
            return call(_OPERATORS[expr.op], [expr.expr, *_list(expr.other)])
        return call(_OPERATORS[expr.op], [expr.expr, expr.other])
    if name in ("AdditiveExpression", "MultiplicativeExpression"):
        tree = to_proto(expr.expr, scope)
        for op, operand in zip(expr.op or (), expr.other or (), strict=True):
            args = [tree, to_proto(operand, scope)]
            tree = plan_pb2.Expr(call=plan_pb2.Call(function=_OPERATORS[op], args=args))
        return tree
    if name in ("UnaryNot", "UnaryMinus", "UnaryPlus"):
        unary = {"UnaryNot": F.FUNCTION_NOT, "UnaryMinus": F.FUNCTION_NEG, "UnaryPlus": F.FUNCTION_POS}
        return call(unary[name], [expr.expr])
    if name == "Function":
        iri = str(expr.iri)
        args = _list(_param(expr, "expr"))
        if iri not in CASTS:
            raise UnsupportedQuery(f"<{iri}>", "extension functions are not evaluated server-side")
        if len(args) != 1:
            raise UnsupportedQuery(f"<{iri}>", "a cast takes one argument")
        return call(F.FUNCTION_CAST, args, iri)
    if name.startswith("Aggregate_"):
        aggregate = name.removeprefix("Aggregate_")
        raise UnsupportedQuery(_AGGREGATES.get(aggregate, aggregate.upper()))
    builtin = name.removeprefix("Builtin_")
    if builtin == "EXISTS":
        raise UnsupportedQuery("EXISTS")
    if builtin == "NOTEXISTS":
        raise UnsupportedQuery("NOT EXISTS")
    if builtin in _NON_DETERMINISTIC or (builtin == "BNODE" and _param(expr, "arg") is None):
        raise UnsupportedQuery(builtin)
    if builtin in _LISTS:
        return call(_LISTS[builtin], _list(expr.arg))
    if name.startswith("Builtin_") and builtin in _BUILTINS:
        function, params = _BUILTINS[builtin]
        values = [_param(expr, p.rstrip("?")) for p in params]
        return call(function, [v for p, v in zip(params, values, strict=True) if v is not None or p[-1] != "?"])
    raise UnsupportedQuery(builtin)


def _param(expr: Any, name: str) -> Any:
    """A CompValue parameter, None when absent (CompValue.get returns the name)."""
    return expr[name] if name in expr else None


def _list(value: Any) -> list[Any]:
    """rdflib gives an empty argument list as rdf:nil."""
    if value is None or (isinstance(value, URIRef) and value == RDF_NIL):
        return []
    return list(value)


def variables(expr: plan_pb2.Expr) -> set[int]:
    """Slots the expression reads."""
    kind = expr.WhichOneof("kind")
    if kind == "variable":
        return {expr.variable}
    if kind == "call":
        return set().union(*(variables(a) for a in expr.call.args))
    return set()


def renumber(expr: plan_pb2.Expr, id_map: Callable[[int], int]) -> plan_pb2.Expr:
    """A copy with every term id mapped (extra terms are renumbered on save)."""
    kind = expr.WhichOneof("kind")
    if kind == "term":
        return plan_pb2.Expr(term=id_map(expr.term))
    if kind == "call":
        call = expr.call
        args = [renumber(a, id_map) for a in call.args]
        return plan_pb2.Expr(call=plan_pb2.Call(function=call.function, args=args, iri=call.iri))
    out = plan_pb2.Expr()
    out.CopyFrom(expr)
    return out


# -- protobuf -> closures --


def compile_test(expr: plan_pb2.Expr, terms: TermTable) -> Callable[[Mapping], bool]:
    """FILTER: the effective boolean value; an error is false."""
    test = _Compiler(terms).compile(expr).test
    return lambda mu: test(mu) is True


def compile_value(expr: plan_pb2.Expr, terms: TermTable) -> Callable[[Mapping], int]:
    """BIND: the result's term id, or 0 on an error (the variable stays unbound)."""
    compiler = _Compiler(terms)
    evaluate = compiler.compile(expr).value
    intern = compiler.decoder.intern

    def run(mu: Mapping) -> int:
        v = evaluate(mu)
        if v is None:
            return 0
        return v.gid or intern(v)

    return run


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
        def value(mu: Mapping) -> Value | None:
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
        self.terms = terms
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
        """The id of a computed value, remembered on the value too (a folded
        constant returns the same value for every mapping)."""
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
        v.gid = gid
        return gid


_decoders: weakref.WeakKeyDictionary[TermTable, _Decoder] = weakref.WeakKeyDictionary()


def _from_node(node: Node, gid: int = 0) -> Value:
    if isinstance(node, Literal):
        dt = str(node.datatype) if node.datatype is not None else None
        return make_literal(str(node), node.language, dt, gid)
    if isinstance(node, BNode):
        return Blank(str(node), gid)
    return Iri(str(node), gid)


def _to_node(v: Value) -> Node:
    if type(v) is Lit:
        if v.lang:
            return Literal(v.lex, lang=v.lang)
        return Literal(v.lex, datatype=None if v.dt == XSD_STRING else URIRef(v.dt))
    if type(v) is Iri:
        return URIRef(v.value)
    return BNode(v.label)  # type: ignore[union-attr]


class _Compiler:
    """Builds the closures of one expression. A call whose arguments are all
    constants is evaluated here, once (every function but BNODE depends on
    its arguments alone)."""

    def __init__(self, terms: TermTable) -> None:
        self.terms = terms
        self.decoder = _decoders.get(terms)
        if self.decoder is None:
            self.decoder = _decoders[terms] = _Decoder(terms)

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

        def run(mu: Mapping) -> Value | None:
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

        def run1(mu: Mapping) -> Value | None:
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

        def run2(mu: Mapping) -> Value | None:
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

    def run(mu: Mapping) -> Value | None:
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


Builder = Callable[[_Compiler, plan_pb2.Call, list[_Node]], _Node]


def _function(impl: Callable[..., Value], low: int, high: int | None = None, boolean: bool = False) -> Builder:
    def build(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, low, high)
        evaluate = _strict(impl, [a.value for a in args])
        if not boolean:
            return _Node.of_value(evaluate)

        def test(mu: Mapping) -> bool | None:
            v = evaluate(mu)
            return None if v is None else v.val is True  # type: ignore[union-attr]

        return _Node(evaluate, test)

    return build


def _cast(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 1)
    impl = CASTS.get(call.iri)
    if impl is None:
        raise InvalidPlan(f"cast to <{call.iri}>")
    return _Node.of_value(_strict(impl, [args[0].value]))


def _logical(conjunction: bool) -> Builder:
    """|| and && (17.2): an error loses to an operand that decides the result."""

    def build(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        tests = [a.test for a in args]
        decisive = not conjunction  # true decides ||, false decides &&

        def run(mu: Mapping) -> bool | None:
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


def _not(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 1)
    test = args[0].test

    def run(mu: Mapping) -> bool | None:
        r = test(mu)
        return None if r is None else not r

    return _Node.of_test(run)


def _equality(negated: bool) -> Builder:
    def build(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, 2)
        a, b = args[0].value, args[1].value

        def run(mu: Mapping) -> bool | None:
            x = a(mu)
            if x is None:
                return None
            y = b(mu)
            if y is None:
                return None
            r = equal(x, y)
            return None if r is None else r is not negated

        return _Node.of_test(run)

    return build


def _ordering(accepted: frozenset[int]) -> Builder:
    """< <= > >=: `accepted` orders; a NaN operand (UNORDERED) accepts none."""

    def build(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, 2)
        a, b = args[0].value, args[1].value

        def run(mu: Mapping) -> bool | None:
            x = a(mu)
            if x is None:
                return None
            y = b(mu)
            if y is None:
                return None
            order = compare(x, y)
            return None if order is None else order in accepted

        return _Node.of_test(run)

    return build


def _membership(negated: bool) -> Builder:
    """IN is `A = l1 || A = l2 ...`, NOT IN `A != l1 && A != l2 ...` (17.4.1.9-10)."""

    def build(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
        _arity(call, 1, 1 << 30)
        needle = args[0].value
        options = [a.value for a in args[1:]]
        if not options:
            return _Node.of_constant(TRUE if negated else FALSE)

        def run(mu: Mapping) -> bool | None:
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


def _if(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    _arity(call, 3)
    condition, then, otherwise = args[0].test, args[1].value, args[2].value

    def run(mu: Mapping) -> Value | None:
        c = condition(mu)
        if c is None:
            return None
        return then(mu) if c else otherwise(mu)

    return _Node.of_value(run)


def _coalesce(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    options = [a.value for a in args]

    def run(mu: Mapping) -> Value | None:
        for f in options:
            v = f(mu)
            if v is not None:
                return v
        return None

    return _Node.of_value(run)


def _bnode(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
    """BNODE(str): the same node for the same string within one solution, a
    different one across solutions. The label digests the string and the
    solution's terms (not their ids, which a saved plan renumbers), so every
    quantum of a query agrees."""
    _arity(call, 1)
    arg, text = args[0].value, compiler.terms.string

    def run(mu: Mapping) -> Value | None:
        v = arg(mu)
        if type(v) is not Lit or v.kind != STRING:
            return None
        digest = hashlib.sha1(v.lex.encode())
        for gid in mu:
            digest.update(b"\0" + (text(gid).encode() if gid else b""))
        return Blank("q" + digest.hexdigest()[:24])

    return _Node.of_value(run)


def _regex(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
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

    def test(mu: Mapping) -> bool | None:
        v = text(mu)
        if type(v) is not Lit or not (v.kind == STRING or v.kind == LANG):
            return None
        return search(v.lex) is not None

    return _Node.of_test(test)


def _replace(compiler: _Compiler, call: plan_pb2.Call, args: list[_Node]) -> _Node:
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
    F.FUNCTION_CAST: _cast,
    F.FUNCTION_IF: _if,
    F.FUNCTION_COALESCE: _coalesce,
    F.FUNCTION_BNODE: _bnode,
    F.FUNCTION_REGEX: _regex,
    F.FUNCTION_REPLACE: _replace,
}
