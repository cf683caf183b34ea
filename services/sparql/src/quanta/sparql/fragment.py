"""The server fragment: which parts of a query the preemptable server evaluates.

One decision, made here for everyone: the engine's compiler refuses what is
outside (`check`), the smart client sends the server the largest pieces
inside and runs the rest itself (`refusal`, `refusals`), and the W3C
conformance harness knows which tests the server must refuse.

Inside: BGPs, with sequence and inverse property paths (chains of triple
patterns); multiset UNION; OPTIONAL; FILTER and BIND over deterministic expressions
(the builtins `quanta.sparql.expressions` translates, and XSD casts);
VALUES; and at the top of a SELECT or ASK, the projection, LIMIT/OFFSET and
REDUCED. Outside: what needs all mappings at once (MINUS,
DISTINCT, ORDER BY, GROUP BY and aggregates, EXISTS, subqueries), other
property paths, GRAPH, FROM, SERVICE, CONSTRUCT and DESCRIBE, extension
functions, and the functions that would answer differently in different
quanta of one query (NOW, RAND, UUID, STRUUID, BNODE()). A query asked for
partial answers may also be a DISTINCT, a GROUP BY with COUNT(*) or an
ORDER BY ... LIMIT of a pattern inside (`partial`), answered per quantum for
the client to merge.

Nodes are quanta's SPARQL algebra (`quanta.sparql.syntax.AlgebraNode`s, as
`quanta.sparql.parse` gives them). Operators are named as the service's refusals name them (the
`operator` member of an `unsupported-operator` problem).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from quanta.sparql.errors import UnsupportedQuery
from quanta.sparql.syntax import AlgebraNode, PathInverse, PathSequence, PropertyPath, Var

# Graph patterns the server evaluates (ToMultiSet: only over VALUES).
SERVER_PATTERNS = frozenset({"BGP", "Join", "LeftJoin", "Union", "Filter", "Extend", "ToMultiSet", "values"})
# Expression nodes the server evaluates besides builtins and casts.
SERVER_EXPRESSIONS = frozenset(
    {
        "ConditionalOrExpression",
        "ConditionalAndExpression",
        "RelationalExpression",
        "AdditiveExpression",
        "MultiplicativeExpression",
        "UnaryNot",
        "UnaryMinus",
        "UnaryPlus",
        "TrueFilter",
    }
)
# Client-side graph patterns, by the operator named when refusing them. A
# projection, slice or REDUCED below the top of the query is a subquery.
CLIENT_PATTERNS = {
    "Minus": "MINUS",
    "Distinct": "DISTINCT",
    "OrderBy": "ORDER BY",
    "Graph": "GRAPH",
    "ServiceGraphPattern": "SERVICE",
    "Project": "subquery",
    "Slice": "subquery",
    "Reduced": "subquery",
}
FORMS: dict[str, str | None] = {
    "SelectQuery": None,
    "AskQuery": None,
    "ConstructQuery": "CONSTRUCT",
    "DescribeQuery": "DESCRIBE",
}
# Different answers in different quanta of one query.
NON_DETERMINISTIC = frozenset({"NOW", "RAND", "UUID", "STRUUID"})
# Nodes that only carry parts of their parent (the parent decides).
_PARTS = frozenset({"OrderCondition", "DatasetClause"})
# Whose insides the client evaluates whole: not searched.
_OPAQUE = frozenset({"Builtin_EXISTS", "Builtin_NOTEXISTS", "ServiceGraphPattern"})
DETAILS = {"FROM": "the service has one default graph per dataset"}


def refusal(node: Any) -> str | None:
    """The operator an algebra node stands for when the server does not
    evaluate it, its children aside (they have their own); None when it does.
    Graph patterns, expressions and query forms alike."""
    name: str = node.name
    if name in SERVER_PATTERNS:
        if name == "BGP":
            chains = all(_chain(term) for triple in node.triples for term in triple)
            return None if chains else "property path"
        if name == "ToMultiSet" and node.p.name != "values":
            return "subquery"
        return None
    if name in SERVER_EXPRESSIONS or name in _PARTS:
        return None
    if name in CLIENT_PATTERNS:
        return CLIENT_PATTERNS[name]
    if name in FORMS:
        return FORMS[name]
    if name in ("AggregateJoin", "Group"):
        group = node.p if name == "AggregateJoin" else node
        return "GROUP BY" if _param(group, "expr") else "aggregates"
    if name == "Function":
        # the expression modules are imported only by a query that has expressions
        from quanta.sparql.functions_casts import CASTS

        iri = str(node.iri)
        args = _param(node, "expr")
        return None if iri in CASTS and isinstance(args, list) and len(args) == 1 else f"<{iri}>"
    if name.startswith("Aggregate_"):
        aggregate = name.removeprefix("Aggregate_")
        return "GROUP_CONCAT" if aggregate == "GroupConcat" else aggregate.upper()
    if name.startswith("Builtin_"):
        from quanta.sparql.expressions import BUILTINS  # as CASTS above (this one brings protobuf)

        builtin = name.removeprefix("Builtin_")
        if builtin == "NOTEXISTS":
            return "NOT EXISTS"
        if builtin == "BNODE" and _param(node, "arg") is None:
            return "BNODE"  # a fresh node per call
        return None if builtin in BUILTINS and builtin not in NON_DETERMINISTIC else builtin
    return name


def refusals(node: Any) -> list[str]:
    """Every operator of an algebra subtree (a graph pattern or an expression)
    that the server does not evaluate, in pre-order, each once. Empty: the
    server evaluates the whole subtree (as a group graph pattern)."""
    return _unique(_walk(node))


def server_evaluates(node: Any) -> bool:
    """Whether the server evaluates the whole subtree."""
    return next(_walk(node), None) is None


def select_refusals(node: Any) -> list[str]:
    """`refusals` of what is below a SELECT or ASK query form (or of a
    subquery below its ToMultiSet): at its top, LIMIT/OFFSET, REDUCED and the
    projection are the server's. The algebra nests them as
    Slice(Distinct|Reduced(Project(pattern)))."""
    found = []
    if node.name == "Slice":
        node = node.p
    if node.name in ("Distinct", "Reduced"):
        if node.name == "Distinct":
            found.append("DISTINCT")
        node = node.p
    if node.name == "Project":
        node = node.p
    return _unique(found + refusals(node))


def query_refusals(query: Any) -> list[str]:
    """Every operator of a whole query that the server does not evaluate, in
    pre-order (query form, FROM, then the pattern), each once. `query` is the
    algebra of a query form: `parse(text).algebra.algebra`."""
    found = [form] if (form := FORMS.get(query.name)) else []
    if _param(query, "datasetClause"):
        found.append("FROM")
    if query.p is None:  # DESCRIBE <iri> without a WHERE clause: no pattern at all
        return found
    return _unique(found + select_refusals(query.p))


# The largest k of an ORDER BY ... LIMIT k answered in partial answers (the rows a quantum keeps)
MAX_TOP = 10_000


@dataclass(frozen=True)
class Partial:
    """A query below SELECT that the server answers in partial answers per quantum,
    which the client merges: `pattern`, a pattern the server evaluates, and
    - DISTINCT of `variables` (`count` and `order` None);
    - GROUP BY `variables` (maybe none) with one COUNT(*) bound to `count`;
    - ORDER BY `order` ((variable, descending) each) LIMIT `limit` of `variables`."""

    pattern: Any
    variables: list[Var]
    count: Var | None = None
    order: list[tuple[Var, bool]] | None = None
    limit: int = 0


def partial(node: Any) -> Partial | None:
    """The partial answers a SELECT's pattern (`query.p`) may be answered in; None if none."""
    if node.name == "Distinct" and node.p.name == "Project":
        variables = list(node.p.PV)
        if all(isinstance(v, Var) for v in variables) and server_evaluates(node.p.p):
            return Partial(node.p.p, variables)
        return None
    if node.name == "Slice":
        return _top(node)
    extend = node.p if node.name == "Project" else None
    if extend is None or extend.name != "Extend" or extend.p.name != "AggregateJoin":
        return None
    join = extend.p
    keys = _param(join.p, "expr") or []
    (count, *others) = join.A
    if (
        others
        or count.name != "Aggregate_Count"
        or _param(count, "vars") != "*"
        or _param(count, "distinct")
        or extend.expr != count.res
        or not all(isinstance(k, Var) for k in keys)
        or sorted(map(str, node.PV)) != sorted(map(str, [*keys, extend.var]))
        or not server_evaluates(join.p.p)
    ):
        return None
    return Partial(join.p.p, list(keys), count=extend.var)


def _top(node: Any) -> Partial | None:
    """`SELECT vars WHERE { P } ORDER BY ?a DESC(?b) LIMIT k`: variables ordered by, no OFFSET."""
    project, limit = node.p, _param(node, "length")
    if node.start or limit is None or not 0 < limit <= MAX_TOP or project.name != "Project":
        return None
    order = project.p
    if order.name != "OrderBy" or not server_evaluates(order.p):
        return None
    keys = []
    for condition in order.expr:
        var = condition.expr if isinstance(condition, AlgebraNode) and condition.name == "OrderCondition" else condition
        if not isinstance(var, Var):
            return None
        keys.append((var, isinstance(condition, AlgebraNode) and _param(condition, "order") == "DESC"))
    variables = list(project.PV)
    if not all(isinstance(v, Var) for v in variables):
        return None
    return Partial(order.p, variables, order=keys, limit=limit)


def check(query: Any) -> None:
    """Raise UnsupportedQuery naming the query's first client-side operator."""
    refuse(query_refusals(query))


def refuse(found: Sequence[str]) -> None:
    """Raise UnsupportedQuery naming the first of `found` (a query's refusals), if any."""
    if found:
        raise UnsupportedQuery(found[0], DETAILS.get(found[0], ""))


def _walk(node: Any) -> Iterator[str]:
    if isinstance(node, AlgebraNode):
        operator = refusal(node)
        if operator is not None:
            yield operator
        if node.name in _OPAQUE:
            return
        for key, value in node.items():  # terms (str) are leaves: no call for them
            if not isinstance(value, str) and key[0] != "_" and not (key == "A" and node.name == "AggregateJoin"):
                yield from _walk(value)
    elif isinstance(node, list | tuple):
        for item in node:
            if not isinstance(item, str):
                yield from _walk(item)


def _chain(term: Any) -> bool:
    """A term, or a path the server expands into a chain of triple patterns:
    sequences (p/q) and inverses (^p). Closures (*, +, ?), alternatives and
    negated property sets are the client's."""
    if isinstance(term, PathInverse):
        return _chain(term.arg)
    if isinstance(term, PathSequence):
        return all(_chain(step) for step in term.args)
    return not isinstance(term, PropertyPath)


def _param(node: Any, name: str) -> Any:
    """A node's member, None when absent."""
    return dict.get(node, name)


def _unique(operators: list[str] | Iterator[str]) -> list[str]:
    return list(dict.fromkeys(operators))
