"""SPARQL text for the server: a server-fragment piece of the algebra, written back.

Each algebra node is written so that its group means exactly the node:
FILTER applies to the group it closes, BIND to the group before it, so the
children of a FILTER or BIND that are not plain triples get braces of their
own. `inject` (VALUES text) is put at the start of every group: that is how
the rows of a bind join reach every FILTER and BIND of the piece, i.e.
EXISTS's substitution semantics (a FILTER inside sees the outer values).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from quanta.sparql.expressions import parameters
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
from quanta.sparql.terms import RDF_LANGSTRING, SKOLEM_PREFIX, from_term, iri_ref, nt_term, skolem

RDF_NIL = IriTerm("http://www.w3.org/1999/02/22-rdf-syntax-ns#nil")
_OPERATORS = {"ConditionalOrExpression": "||", "ConditionalAndExpression": "&&"}
_UNARY = {"UnaryNot": "!", "UnaryMinus": "-", "UnaryPlus": "+"}


def value_text(term: str | None) -> str:
    """A dictionary-syntax term (or None: UNDEF) as SPARQL text, for VALUES."""
    if term is None:
        return "UNDEF"
    if term.startswith("_:"):
        return iri_ref(skolem(term))
    if term.startswith('"') and term.endswith(f"^^<{RDF_LANGSTRING}>"):
        return "UNDEF"  # not a valid term without a language tag; never in data
    return nt_term(term)


def values_clause(names: Sequence[str], rows: Sequence[Sequence[str | None]]) -> str:
    """`VALUES (?a ?b) { (<x> UNDEF) ... }`."""
    head = " ".join(f"?{n}" for n in names)
    body = " ".join("(" + " ".join(value_text(t) for t in row) + ")" for row in rows)
    return f"VALUES ({head}) {{ {body} }}"


class Writer:
    """Writes pieces with variables named by `name` (the slots' names)."""

    def __init__(self, name: Callable[[Var], str], inject: str = "", base: str | None = None) -> None:
        self.name = name
        self.inject = inject
        self.base = base  # IRI() resolves against it

    # -- whole queries --

    def select(
        self,
        pattern: Any,
        projection: Sequence[Var],
        *,
        top: str = "",
        having: Any = None,
        limit: int | None = None,
        offset: int = 0,
        distinct: bool = False,
        count: Var | None = None,
        order: Sequence[tuple[Var, bool]] = (),
        reduced: Sequence[tuple[Var, Var, str]] = (),
    ) -> str:
        """`SELECT projection WHERE { top {pattern} FILTER(having) }`: `top`
        (a bind join's VALUES) joins the pattern as a whole; `having` filters
        the join (an OPTIONAL's condition sees both sides). `distinct`: SELECT
        DISTINCT; `count`: the projection is grouped by, and COUNT(*) is bound
        to `count`; `reduced`: grouped by too, (MIN|MAX|SAMPLE(argument) AS result) each;
        `order`: ORDER BY these (variable, descending) (the shapes a server answers in
        partial answers)."""
        head = " ".join(f"?{self.name(v)}" for v in projection)
        if count is not None:
            head += f" (COUNT(*) AS ?{self.name(count)})"
        for argument, result, how in reduced:
            head += f" ({how.upper()}(?{self.name(argument)}) AS ?{self.name(result)})"
        head = ("DISTINCT " if distinct else "") + (head.strip() or "*")
        if top or having is not None:
            body = f"{self.inject} {top} {self.group(pattern)}"
            if having is not None:
                body += f" FILTER({self.expr(having)})"
        else:
            body = f"{self.inject} {self.elements(pattern)}"
        text = f"SELECT {head} WHERE {{ {body.strip()} }}"
        if (count is not None or reduced) and projection:
            text += " GROUP BY " + " ".join(f"?{self.name(v)}" for v in projection)
        if order:
            text += " ORDER BY " + " ".join(f"DESC(?{self.name(v)})" if d else f"?{self.name(v)}" for v, d in order)
        if self.base:
            text = f"BASE {iri_ref(self.base)}\n{text}"
        if limit is not None:
            text += f" LIMIT {limit}"
        if offset:
            text += f" OFFSET {offset}"
        return text

    # -- graph patterns --

    def group(self, node: Any) -> str:
        return "{ " + f"{self.inject} {self.elements(node)}".strip() + " }"

    def elements(self, node: Any) -> str:
        """The node as the contents of a group."""
        name = node.name
        if name == "BGP":
            return " ".join(self.triple(t) for t in node.triples)
        if name == "Join":
            return f"{self.part(node.p1)} {self.part(node.p2)}"
        if name == "Union":  # left-deep unions flat, as written: not nested 500 groups deep
            left = self.elements(node.p1) if node.p1.name == "Union" else self.group(node.p1)
            return f"{left} UNION {self.group(node.p2)}"
        if name == "Filter":
            inner = self.elements(node.p) if node.p.name in ("BGP", "Join") else self.group(node.p)
            return f"{inner} FILTER({self.expr(node.expr)})"
        if name == "Extend":
            inner = self.elements(node.p) if node.p.name in ("BGP", "Join") else self.group(node.p)
            return f"{inner} BIND({self.expr(node.expr)} AS ?{self.name(node.var)})"
        if name == "LeftJoin":  # the OPTIONAL's group: its pattern, and its condition (seeing both sides)
            left = self.elements(node.p1) if node.p1.name in ("BGP", "Join", "LeftJoin") else self.group(node.p1)
            right = self.part(node.p2)
            if node.expr.name != "TrueFilter":
                right += f" FILTER({self.expr(node.expr)})"
            return f"{left} OPTIONAL " + "{ " + f"{self.inject} {right}".strip() + " }"
        if name == "Minus":
            inline = node.p1.name in ("BGP", "Join", "LeftJoin", "Minus")
            return f"{self.elements(node.p1) if inline else self.group(node.p1)} MINUS {self.group(node.p2)}"
        if name == "ToMultiSet":
            return self.elements(node.p)
        if name == "values":
            return self.values(node)
        raise ValueError(f"{name} is not in the server fragment")

    def part(self, node: Any) -> str:
        """A child of a join: triples and joins inline, anything else grouped."""
        return self.elements(node) if node.name in ("BGP", "Join") else self.group(node)

    def values(self, node: Any) -> str:
        variables: list[Var] = []
        for row in node.res:
            variables += [v for v in row if v not in variables]
        rows = [[self.term_or_undef(row.get(v)) for v in variables] for row in node.res]
        head = " ".join(f"?{self.name(v)}" for v in variables)
        body = " ".join("(" + " ".join(r) + ")" for r in rows)
        return f"VALUES ({head}) {{ {body} }}"

    def term_or_undef(self, node: Any) -> str:
        return "UNDEF" if node is None or node == "UNDEF" else self.term(node)

    def triple(self, triple: tuple[RdfTerm, Any, RdfTerm]) -> str:
        s, p, o = triple
        return f"{self.term(s)} {self.path(p)} {self.term(o)} ."

    def path(self, path: Any) -> str:
        if isinstance(path, PathInverse):
            return f"^({self.path(path.arg)})"
        if isinstance(path, PathSequence):
            return "(" + "/".join(self.path(step) for step in path.args) + ")"
        if isinstance(path, PathAlternative):
            return "(" + "|".join(self.path(step) for step in path.args) + ")"
        if isinstance(path, PathRepeat):
            return f"({self.path(path.path)}){path.mod}"
        if isinstance(path, PathNegated):
            return "!(" + "|".join(self.path(step) for step in path.args) + ")"
        if isinstance(path, PropertyPath):
            raise ValueError(f"path {path} is not in the server fragment")
        return self.term(path)

    def term(self, node: Any) -> str:
        if isinstance(node, Var):
            return f"?{self.name(node)}"
        if isinstance(node, BlankTerm):
            raise ValueError("blank nodes of patterns are variables by now")
        if isinstance(node, IriTerm) and node.startswith(SKOLEM_PREFIX):
            return iri_ref(str(node))  # a blank node of the data, named (not a variable)
        if isinstance(node, IriTerm | LiteralTerm):
            return nt_term(from_term(node))
        raise ValueError(f"not a term: {node!r}")

    # -- expressions --

    def expr(self, e: Any) -> str:
        if not isinstance(e, AlgebraNode):
            return self.term(e)
        name = e.name
        if name in _OPERATORS:
            return "(" + f" {_OPERATORS[name]} ".join(self.expr(x) for x in [e.expr, *(e.other or ())]) + ")"
        if name == "RelationalExpression":
            if e.op in ("IN", "NOT IN"):
                options = ", ".join(self.expr(x) for x in _list(e.other))
                return f"({self.expr(e.expr)} {e.op} ({options}))"
            return f"({self.expr(e.expr)} {e.op} {self.expr(e.other)})"
        if name in ("AdditiveExpression", "MultiplicativeExpression"):
            text = self.expr(e.expr)  # left-associative: one pair of brackets for the chain
            for op, operand in zip(e.op or (), e.other or (), strict=True):
                text = f"{text} {op} {self.expr(operand)}"
            return f"({text})" if e.op else text
        if name in _UNARY:
            return f"({_UNARY[name]}{self.expr(e.expr)})"
        if name == "TrueFilter":
            return "true"
        if name == "Function":
            return f"{iri_ref(str(e.iri))}({', '.join(self.expr(a) for a in _list(dict.get(e, 'expr')))})"
        if name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
            return f"{'NOT ' if name == 'Builtin_NOTEXISTS' else ''}EXISTS {self.group(e.graph)}"
        if name.startswith("Builtin_"):
            builtin = name.removeprefix("Builtin_")
            if builtin in ("CONCAT", "COALESCE"):
                return f"{builtin}({', '.join(self.expr(a) for a in _list(e.arg))})"
            params = parameters(builtin) or ()
            args = [dict.get(e, p.rstrip("?")) for p in params]
            shown = [self.expr(a) for p, a in zip(params, args, strict=True) if a is not None or not p.endswith("?")]
            return f"{builtin}({', '.join(shown)})"
        raise ValueError(f"expression {name} is not in the server fragment")


def _list(value: Any) -> list[Any]:
    if value is None or (isinstance(value, IriTerm) and value == RDF_NIL):
        return []
    return list(value)
