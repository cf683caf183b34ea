"""FILTER and BIND expressions: algebra (`quanta.sparql.syntax`) -> protobuf -> Python closures.

A plan stores its expressions as `plan_pb2.Expr` trees over term ids, so a
suspended query carries them in a few bytes. When a plan is loaded, each tree
is compiled once into nested closures (`expr_compile`); evaluating a mapping
then only decodes the ids it reads (cached per term table) and applies the
operators (`expr_values`, `functions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from quanta.plan.v1 import plan_pb2
from quanta.sparql.expr_compile import ExpressionCompiler
from quanta.sparql.functions_casts import CASTS
from quanta.sparql.syntax import BlankTerm, IriTerm, LiteralTerm, RdfTerm, Var
from quanta.sparql.term_table import IdMapping, TermTable

F = plan_pb2.Function
RDF_NIL = IriTerm("http://www.w3.org/1999/02/22-rdf-syntax-ns#nil")


class ExprScope(Protocol):
    def slot(self, var: Var) -> int | None:
        """The variable's slot; None if it is not in scope (it is then unbound)."""
        ...

    def term(self, node: RdfTerm) -> int:
        """The term id of a constant (never 0)."""
        ...


# -- algebra -> protobuf --

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
_BUILTINS: dict[str, tuple[plan_pb2.Function, tuple[str, ...]]] = {
    "BOUND": (F.FUNCTION_BOUND, ("arg",)),
    "isIRI": (F.FUNCTION_IS_IRI, ("arg",)),
    "isURI": (F.FUNCTION_IS_IRI, ("arg",)),
    "isBLANK": (F.FUNCTION_IS_BLANK, ("arg",)),
    "isLITERAL": (F.FUNCTION_IS_LITERAL, ("arg",)),
    "isNUMERIC": (F.FUNCTION_IS_NUMERIC, ("arg",)),
    "STR": (F.FUNCTION_STR, ("arg",)),
    "LANG": (F.FUNCTION_LANG, ("arg",)),
    "DATATYPE": (F.FUNCTION_DATATYPE, ("arg",)),
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
# The builtins translated (quanta.sparql.fragment: the server evaluates these).
BUILTINS = frozenset({*_BUILTINS, *_LISTS, "IRI", "URI"})


def parameters(builtin: str) -> tuple[str, ...] | None:
    """A builtin's parameter names in SPARQL argument order (a trailing "?":
    optional); None for CONCAT and COALESCE (their `arg` is a list) and for
    what is not translated."""
    if builtin in ("IRI", "URI"):
        return ("arg",)
    entry = _BUILTINS.get(builtin)
    return entry[1] if entry else None


def to_proto(expr: Any, scope: ExprScope, base: str | None = None) -> plan_pb2.Expr:
    """Translate an algebra expression into a protobuf Expr tree.
    `base` is the query's base IRI: IRI("x") resolves against it at run time,
    so IRI calls carry it in `Call.iri`. The expression must be in the server
    fragment (`quanta.sparql.fragment` refuses the others, naming them)."""
    if isinstance(expr, Var):
        slot = scope.slot(expr)
        return plan_pb2.Expr() if slot is None else plan_pb2.Expr(variable=slot)
    if isinstance(expr, IriTerm | LiteralTerm | BlankTerm):
        return plan_pb2.Expr(term=scope.term(expr))
    name = getattr(expr, "name", None)
    if not isinstance(name, str):
        raise ValueError(f"not an expression: {expr!r}")

    def call(function: plan_pb2.Function, args: Iterable[Any], iri: str = "") -> plan_pb2.Expr:
        protos = [to_proto(a, scope, base) for a in args]
        return plan_pb2.Expr(call=plan_pb2.Call(function=function, args=protos, iri=iri))

    if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
        function = F.FUNCTION_OR if name == "ConditionalOrExpression" else F.FUNCTION_AND
        return call(function, [expr.expr, *(expr.other or ())])
    if name == "RelationalExpression":
        if expr.op in ("IN", "NOT IN"):
            return call(_OPERATORS[expr.op], [expr.expr, *_list(expr.other)])
        return call(_OPERATORS[expr.op], [expr.expr, expr.other])
    if name in ("AdditiveExpression", "MultiplicativeExpression"):
        tree = to_proto(expr.expr, scope, base)
        for op, operand in zip(expr.op or (), expr.other or (), strict=True):
            args = [tree, to_proto(operand, scope, base)]
            tree = plan_pb2.Expr(call=plan_pb2.Call(function=_OPERATORS[op], args=args))
        return tree
    if name in ("UnaryNot", "UnaryMinus", "UnaryPlus"):
        unary = {"UnaryNot": F.FUNCTION_NOT, "UnaryMinus": F.FUNCTION_NEG, "UnaryPlus": F.FUNCTION_POS}
        return call(unary[name], [expr.expr])
    if name == "Function" and str(expr.iri) in CASTS and len(_list(_param(expr, "expr"))) == 1:
        return call(F.FUNCTION_CAST, _list(_param(expr, "expr")), str(expr.iri))
    builtin = name.removeprefix("Builtin_")
    if builtin in _LISTS:
        return call(_LISTS[builtin], _list(expr.arg))
    if builtin in ("IRI", "URI"):
        return call(F.FUNCTION_IRI, [expr.arg], base or "")
    if (
        name.startswith("Builtin_")
        and builtin in _BUILTINS
        and not (builtin == "BNODE" and _param(expr, "arg") is None)
    ):
        function, params = _BUILTINS[builtin]
        values = [_param(expr, p.rstrip("?")) for p in params]
        return call(function, [v for p, v in zip(params, values, strict=True) if v is not None or p[-1] != "?"])
    raise ValueError(f"{name} is outside the server fragment (quanta.sparql.fragment refuses it)")


def _param(expr: Any, name: str) -> Any:
    """A node's parameter, None when absent."""
    return dict.get(expr, name)


def _list(value: Any) -> list[Any]:
    """An argument list (rdf:nil, as rdflib gave an empty one, is none)."""
    if value is None or (isinstance(value, IriTerm) and value == RDF_NIL):
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


def _same(n: int) -> int:
    return n


def renumber(
    expr: plan_pb2.Expr, id_map: Callable[[int], int] = _same, slot_map: Callable[[int], int] = _same
) -> plan_pb2.Expr:
    """A copy with every term id mapped (extra terms are renumbered on save), and every
    slot (a variable read under another's name)."""
    kind = expr.WhichOneof("kind")
    if kind == "term":
        return plan_pb2.Expr(term=id_map(expr.term))
    if kind == "variable":
        return plan_pb2.Expr(variable=slot_map(expr.variable))
    if kind == "call":
        call = expr.call
        args = [renumber(a, id_map, slot_map) for a in call.args]
        return plan_pb2.Expr(call=plan_pb2.Call(function=call.function, args=args, iri=call.iri))
    out = plan_pb2.Expr()
    out.CopyFrom(expr)
    return out


# -- protobuf -> closures --


def compile_test(expr: plan_pb2.Expr, terms: TermTable) -> Callable[[IdMapping], bool]:
    """FILTER: the effective boolean value; an error is false."""
    test = ExpressionCompiler(terms).compile(expr).test
    return lambda mu: test(mu) is True


def compile_value(expr: plan_pb2.Expr, terms: TermTable) -> Callable[[IdMapping], int]:
    """BIND: the result's term id, or 0 on an error (the variable stays unbound)."""
    compiler = ExpressionCompiler(terms)
    node = compiler.compile(expr)
    evaluate, intern = node.value, compiler.decoder.intern
    if node.constant:
        v = evaluate(())
        gid = 0 if v is None else v.gid or intern(v)
        return lambda mu: gid

    def run(mu: IdMapping) -> int:
        v = evaluate(mu)
        if v is None:
            return 0
        return v.gid or intern(v)

    return run
