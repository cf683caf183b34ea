"""The native parser's algebra (Oxigraph's spargebra) as the tree the planner and compiler read.

`quanta.native._core.parse_query` gives SPARQL 1.1 algebra as tagged tuples
(`("join", left, right)`, `("var", "x")`, ...). This module builds from them
the nodes the rest of quanta walks: `quanta.sparql.syntax`'s `AlgebraNode`s
(`BGP`, `Join`, `AggregateJoin`, `RelationalExpression`, ...; named and shaped
as rdflib's SPARQL algebra was, which quanta walked before) over its terms
(`Var`, `IriTerm`, `LiteralTerm`, `BlankTerm`) and property paths.

Where spargebra's algebra differs from that shape, the difference is made
here, once:
- chains of `+ -`, `* /`, `||`, `&&` become one node with lists of operands;
- `!(a = b)` and `!(a IN (...))` are `!=` and `NOT IN` (equal by definition);
- `group` is `AggregateJoin(Group)`, a sub-SELECT is wrapped in `ToMultiSet`;
- joins of basic graph patterns and property paths are one `BGP`;
- names spargebra makes up (aggregates' variables, blank nodes of paths)
  are numbered in order, so one text always gives one tree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quanta.sparql.syntax import (
    AlgebraNode,
    BlankTerm,
    IriTerm,
    LiteralTerm,
    PathAlternative,
    PathInverse,
    PathNegated,
    PathRepeat,
    PathSequence,
    PropertyPath,
    RdfTerm,
    Var,
)

Tree = Any  # a tagged tuple from the native parser

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
# spargebra names the variables and blank nodes it introduces with random hex
_MADE_UP = re.compile(r"[0-9a-f]{20,32}")


@dataclass(frozen=True, slots=True)
class Prologue:
    base: str | None


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: its form's node (SelectQuery, AskQuery, ConstructQuery, DescribeQuery)."""

    prologue: Prologue
    algebra: AlgebraNode


def translate(tree: Tree, text: str) -> Query:
    """The query `text` parsed into `tree`, as algebra."""
    return _Translation(text).query(tree)


def node(name: str, **members: Any) -> AlgebraNode:
    return AlgebraNode(name, **members)


_SOLUTION_MODIFIERS = frozenset({"project", "distinct", "reduced", "slice", "orderby"})
_RELATIONS = {"=": "=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
# builtins with other parameters than one `arg`: their names, in argument order
_PARAMETERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ["LANGMATCHES", "CONTAINS", "STRSTARTS", "STRENDS", "STRBEFORE", "STRAFTER", "STRLANG", "STRDT"],
        ("arg1", "arg2"),
    ),
    "SUBSTR": ("arg", "start", "length"),
    "REPLACE": ("arg", "pattern", "replacement", "flags"),
    "REGEX": ("text", "pattern", "flags"),
    **dict.fromkeys(["RAND", "NOW", "UUID", "STRUUID"], ()),
}


class _Translation:
    def __init__(self, text: str) -> None:
        self.text = text
        self.names: dict[str, str] = {}  # made-up name -> numbered name
        self.blanks: dict[str, BlankTerm] = {}

    # -- terms --

    def term(self, t: Tree) -> RdfTerm:
        tag = t[0]
        if tag == "var":
            return Var(self.variable_name(t[1]))
        if tag == "iri":
            return IriTerm(t[1])
        if tag == "literal":
            _, lexical, language, datatype = t
            if language is not None:
                return LiteralTerm(lexical, language=language)
            return LiteralTerm(lexical, datatype=datatype)
        if tag == "bnode":
            blank = self.blanks.get(t[1])
            if blank is None:
                blank = self.blanks[t[1]] = BlankTerm(f"b{len(self.blanks)}")
            return blank
        raise ValueError(f"not a term: {t!r}")

    def variable_name(self, name: str) -> str:
        if not _MADE_UP.fullmatch(name) or f"?{name}" in self.text or f"${name}" in self.text:
            return name
        numbered = self.names.get(name)
        if numbered is None:
            numbered = self.names[name] = f"__agg_{len(self.names) + 1}__"
        return numbered

    def var(self, t: Tree) -> Var:
        v = self.term(t)
        assert isinstance(v, Var)
        return v

    # -- query forms --

    def query(self, t: Tree) -> Query:
        form = t[0]
        if form == "construct":
            _, template, dataset, pattern, base = t
            algebra = node(
                "ConstructQuery",
                p=self.pattern(pattern),
                template=[self.triple(x) for x in template],
                datasetClause=self.dataset(dataset),
            )
        elif form == "describe":
            _, dataset, pattern, base = t
            p, resources = self.described(pattern)
            algebra = node("DescribeQuery", p=p, PV=resources, datasetClause=self.dataset(dataset))
        else:
            _, dataset, pattern, base = t
            p = self.pattern(pattern)
            name = "SelectQuery" if form == "select" else "AskQuery"
            algebra = node(name, p=p, datasetClause=self.dataset(dataset), PV=_projected(p))
        return Query(Prologue(base), algebra)

    def dataset(self, t: Tree) -> list[AlgebraNode] | None:
        if t is None:
            return None
        _, default, named = t
        clauses = [node("DatasetClause", default=self.term(g)) for g in default]
        clauses += [node("DatasetClause", named=self.term(g)) for g in named or ()]
        return clauses

    def described(self, t: Tree) -> tuple[AlgebraNode | None, list[RdfTerm]]:
        """DESCRIBE's pattern (None without WHERE), and what it describes (IRIs and
        variables, in order). spargebra binds each IRI to a made-up variable just
        under the projection."""
        chain: list[Tree] = []
        while t[0] in ("slice", "distinct", "reduced", "orderby"):
            chain.append(t)
            t = t[1]
        assert t[0] == "project"
        _, inner, variables = t
        constants: dict[str, RdfTerm] = {}
        while inner[0] == "extend" and inner[3][0] == "iri":
            constants[inner[2][1]] = IriTerm(inner[3][1])
            inner = inner[1]
        resources = [constants.get(v[1]) or self.var(v) for v in variables]
        if not chain and inner == ("bgp", []):
            return None, resources
        kept = [v for v in variables if v[1] not in constants]
        p: Tree = ("project", inner, kept)
        for outer in reversed(chain):
            p = (outer[0], p, *outer[2:])
        return node("Distinct", p=self.pattern(p)), resources

    def triple(self, t: Tree) -> tuple[RdfTerm, RdfTerm, RdfTerm]:
        s, p, o = t
        return self.term(s), self.term(p), self.term(o)

    # -- graph patterns --

    def pattern(self, t: Tree) -> AlgebraNode:
        translated: AlgebraNode = getattr(self, "p_" + t[0])(t)
        return translated

    def sub(self, t: Tree) -> AlgebraNode:
        """A pattern inside another: a sub-SELECT is a multiset (`ToMultiSet`)."""
        p = self.pattern(t)
        return node("ToMultiSet", p=p) if t[0] in _SOLUTION_MODIFIERS else p

    def p_bgp(self, t: Tree) -> AlgebraNode:
        return node("BGP", triples=[self.triple(x) for x in t[1]])

    def p_path(self, t: Tree) -> AlgebraNode:
        _, s, path, o = t
        return node("BGP", triples=[(self.term(s), self.path(path), self.term(o))])

    def p_join(self, t: Tree) -> AlgebraNode:
        left, right = self.sub(t[1]), self.sub(t[2])
        if left.name == "BGP" and right.name == "BGP":
            return node("BGP", triples=[*left.triples, *right.triples])
        return node("Join", p1=left, p2=right)

    def p_leftjoin(self, t: Tree) -> AlgebraNode:
        _, left, right, expr = t
        condition = node("TrueFilter") if expr is None else self.expr(expr)
        return node("LeftJoin", p1=self.sub(left), p2=self.sub(right), expr=condition)

    def p_filter(self, t: Tree) -> AlgebraNode:
        return node("Filter", expr=self.expr(t[1]), p=self.sub(t[2]))

    def p_union(self, t: Tree) -> AlgebraNode:
        return node("Union", p1=self.sub(t[1]), p2=self.sub(t[2]))

    def p_graph(self, t: Tree) -> AlgebraNode:
        return node("Graph", term=self.term(t[1]), p=self.sub(t[2]))

    def p_extend(self, t: Tree) -> AlgebraNode:
        _, inner, var, expr = t
        return node("Extend", p=self.sub(inner), var=self.var(var), expr=self.expr(expr))

    def p_minus(self, t: Tree) -> AlgebraNode:
        return node("Minus", p1=self.sub(t[1]), p2=self.sub(t[2]))

    def p_values(self, t: Tree) -> AlgebraNode:
        _, variables, rows = t
        names = [self.var(v) for v in variables]
        res = [{v: "UNDEF" if x is None else self.term(x) for v, x in zip(names, row, strict=True)} for row in rows]
        return node("ToMultiSet", p=node("values", res=res))

    def p_orderby(self, t: Tree) -> AlgebraNode:
        _, inner, conditions = t
        expr = [node("OrderCondition", expr=self.expr(e), order="DESC" if desc else "ASC") for desc, e in conditions]
        return node("OrderBy", p=self.pattern(inner), expr=expr)

    def p_project(self, t: Tree) -> AlgebraNode:
        _, inner, variables = t
        return node("Project", p=self.pattern(inner), PV=[self.var(v) for v in variables])

    def p_distinct(self, t: Tree) -> AlgebraNode:
        return node("Distinct", p=self.pattern(t[1]))

    def p_reduced(self, t: Tree) -> AlgebraNode:
        return node("Reduced", p=self.pattern(t[1]))

    def p_slice(self, t: Tree) -> AlgebraNode:
        _, inner, start, length = t
        return node("Slice", p=self.pattern(inner), start=start, length=length)

    def p_group(self, t: Tree) -> AlgebraNode:
        _, inner, variables, aggregates = t
        keys = [self.var(v) for v in variables]
        group = node("Group", p=self.sub(inner), expr=keys or None)
        return node("AggregateJoin", A=[self.aggregate(v, a) for v, a in aggregates], p=group)

    def p_service(self, t: Tree) -> AlgebraNode:
        _, name, inner, silent, text = t
        term = self.term(name)
        keyword = "SERVICE SILENT" if silent else "SERVICE"
        endpoint = f"?{term}" if isinstance(term, Var) else f"<{term}>" if isinstance(term, IriTerm) else str(term)
        return node(
            "ServiceGraphPattern",
            term=term,
            graph=self.sub(inner),
            service_string=f"{keyword} {endpoint} {text[text.index('{') :]}",
            silent="SILENT" if silent else None,
        )

    def p_unsupported(self, t: Tree) -> AlgebraNode:
        raise ValueError(f"{t[1]} is not SPARQL 1.1")

    def aggregate(self, var: Tree, t: Tree) -> AlgebraNode:
        res = self.var(var)
        if t[0] == "count*":
            return node("Aggregate_Count", vars="*", distinct="DISTINCT" if t[1] else [], res=res)
        _, function, distinct, expr, separator = t
        if not isinstance(function, str):
            raise ValueError(f"the aggregate <{function[1]}> is not SPARQL 1.1")
        a = node(f"Aggregate_{function}", vars=self.expr(expr), distinct="DISTINCT" if distinct else [], res=res)
        if separator is not None:
            a["separator"] = separator
        return a

    # -- property paths --

    def path(self, t: Tree) -> PropertyPath | IriTerm:
        tag = t[0]
        if tag == "iri":
            return IriTerm(t[1])
        if tag == "reverse":
            if t[1][0] == "negated":  # !^p
                return _negated([PathInverse(IriTerm(i[1])) for i in t[1][1]])
            return PathInverse(self.path(t[1]))
        if tag == "sequence":
            return PathSequence(*self.spine(t, "sequence", self.path))
        if tag == "alternative":
            parts = self.spine(t, "alternative", lambda x: x)
            if all(p[0] == "negated" or (p[0] == "reverse" and p[1][0] == "negated") for p in parts):
                return _negated([x for p in parts for x in _negated_members(p)])  # !(a|^b)
            return PathAlternative(*[self.path(p) for p in parts])
        if tag in ("*", "+", "?"):
            return PathRepeat(self.path(t[1]), tag)
        if tag == "negated":
            return _negated([IriTerm(i[1]) for i in t[1]])
        raise ValueError(f"not a path: {t!r}")

    @staticmethod
    def spine(t: Tree, tag: str, each: Callable[[Tree], Any]) -> list[Any]:
        """The operands of a left- or right-leaning chain of one binary operator, in order."""
        out: list[Any] = []
        stack = [t]
        while stack:
            x = stack.pop()
            if x[0] == tag:
                stack.extend((x[2], x[1]))
            else:
                out.append(each(x))
        return out

    # -- expressions --

    def expr(self, t: Tree) -> Any:
        tag = t[0]
        if tag in ("var", "iri", "literal", "bnode"):
            return self.term(t)
        if tag in ("||", "&&"):
            first, *others = self.spine(t, tag, self.expr)
            name = "ConditionalOrExpression" if tag == "||" else "ConditionalAndExpression"
            return node(name, expr=first, other=others)
        if tag in _RELATIONS:
            return node("RelationalExpression", expr=self.expr(t[1]), op=tag, other=self.expr(t[2]))
        if tag == "in":
            return node("RelationalExpression", expr=self.expr(t[1]), op="IN", other=[self.expr(x) for x in t[2]])
        if tag in ("+", "-", "*", "/"):
            return self.arithmetic(t)
        if tag == "!":
            inner = t[1]
            if inner[0] == "=":
                return node("RelationalExpression", expr=self.expr(inner[1]), op="!=", other=self.expr(inner[2]))
            if inner[0] == "in":
                other = [self.expr(x) for x in inner[2]]
                return node("RelationalExpression", expr=self.expr(inner[1]), op="NOT IN", other=other)
            if inner[0] == "exists":
                return node("Builtin_NOTEXISTS", graph=self.sub(inner[1]))
            return node("UnaryNot", expr=self.expr(inner))
        if tag in ("u+", "u-"):
            return node("UnaryPlus" if tag == "u+" else "UnaryMinus", expr=self.expr(t[1]))
        if tag == "exists":
            return node("Builtin_EXISTS", graph=self.sub(t[1]))
        if tag == "bound":
            return node("Builtin_BOUND", arg=self.term(t[1]))
        if tag == "if":
            return node("Builtin_IF", arg1=self.expr(t[1]), arg2=self.expr(t[2]), arg3=self.expr(t[3]))
        if tag == "coalesce":
            return node("Builtin_COALESCE", arg=[self.expr(x) for x in t[1]])
        if tag == "sameTerm":
            return node("Builtin_sameTerm", arg1=self.expr(t[1]), arg2=self.expr(t[2]))
        if tag == "call":
            return self.call(t[1], t[2])
        raise ValueError(f"not an expression: {t!r}")

    def arithmetic(self, t: Tree) -> AlgebraNode:
        """`a + b - c` (left-leaning in spargebra) as one node: expr a, op [+, -], other [b, c]."""
        additive = t[0] in ("+", "-")
        ops: list[str] = []
        others: list[Any] = []
        while t[0] in (("+", "-") if additive else ("*", "/")):
            ops.append(t[0])
            others.append(t[2])
            t = t[1]
        name = "AdditiveExpression" if additive else "MultiplicativeExpression"
        return node(name, expr=self.expr(t), op=ops[::-1], other=[self.expr(x) for x in reversed(others)])

    def call(self, function: Any, args: list[Tree]) -> AlgebraNode:
        values = [self.expr(a) for a in args]
        if not isinstance(function, str):
            return node("Function", iri=IriTerm(function[1]), expr=values)
        if function == "unsupported":
            raise ValueError("a function that is not SPARQL 1.1")
        if function == "CONCAT":
            return node("Builtin_CONCAT", arg=values)
        parameters = _PARAMETERS.get(function, ("arg",))
        return node(f"Builtin_{function}", **dict(zip(parameters, values, strict=False)))


def _projected(p: AlgebraNode) -> list[Var]:
    """The variables of the outermost projection (SELECT's columns)."""
    while p.name in ("Slice", "Distinct", "Reduced", "OrderBy"):
        p = p.p
    return list(p.PV) if p.name == "Project" else []


def _negated_members(t: Tree) -> list[IriTerm | PathInverse]:
    if t[0] == "negated":
        return [IriTerm(i[1]) for i in t[1]]
    return [PathInverse(IriTerm(i[1])) for i in t[1][1]]  # ("reverse", ("negated", [...]))


def _negated(members: list[Any]) -> PathNegated:
    """A negated property set over IRIs and inverse IRIs."""
    return PathNegated(members)
