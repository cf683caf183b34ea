"""The server fragment: which parts of a query the preemptable server evaluates.

One decision, made here for everyone: the engine's compiler refuses what is
outside (`check`), the smart client sends the server the largest pieces
inside and runs the rest itself (`refusal`, `refusals`), and the W3C
conformance harness knows which tests the server must refuse.

Inside: BGPs, with sequence and inverse property paths (chains of triple
patterns) and closures with an anchored end (`triple_inside`); multiset
UNION; OPTIONAL; FILTER and BIND over deterministic expressions (the builtins
`quanta.sparql.expressions` translates, and XSD casts); a FILTER (NOT) EXISTS
that is one of its FILTER's conjuncts, over a pattern inside without
OPTIONAL, MINUS or EXISTS of its own (`exists_conjunct`); MINUS when every
variable its two sides share is bound by each solution of its right side
(`minus_inside`); VALUES; and at the top of a SELECT or ASK, the projection,
LIMIT/OFFSET and REDUCED. Outside: what needs all mappings at once
(DISTINCT, ORDER BY, GROUP BY and aggregates, other EXISTS and MINUS,
subqueries), other property paths (alternatives and negated sets outside a
closure, other closures), GRAPH, FROM, SERVICE, CONSTRUCT and DESCRIBE,
extension functions, and the functions that would answer differently in
different quanta of one query (NOW, RAND, UUID, STRUUID, BNODE()). A query
asked for partial answers may also be a DISTINCT, a GROUP BY with COUNT(*)
or an ORDER BY ... LIMIT of a pattern inside (`partial`), answered per
quantum for the client to merge.

Nodes are quanta's SPARQL algebra (`quanta.sparql.syntax.AlgebraNode`s, as
`quanta.sparql.parse` gives them). Operators are named as the service's refusals name them (the
`operator` member of an `unsupported-operator` problem).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from quanta.sparql.errors import UnsupportedQuery
from quanta.sparql.paths import chain
from quanta.sparql.syntax import AlgebraNode, BlankTerm, PathAlternative, PathInverse, PathRepeat, PathSequence, Var

# Graph patterns the server evaluates (ToMultiSet: only over VALUES).
SERVER_PATTERNS = frozenset({"BGP", "Join", "LeftJoin", "Minus", "Union", "Filter", "Extend", "ToMultiSet", "values"})
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
            inside = all(triple_inside(triple, node.triples) for triple in node.triples)
            return None if inside else "property path"
        if name == "ToMultiSet" and node.p.name != "values":
            return "subquery"
        if name == "Minus" and not minus_inside(node):
            return "MINUS"
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


# Aggregates a worker running a query whole computes (`whole_refusals`): COUNT, and the
# reductions of its tally, SUM and AVG of any expression it evaluates among them
WHOLE_AGGREGATES = frozenset(
    {"Aggregate_Count", "Aggregate_Min", "Aggregate_Max", "Aggregate_Sample", "Aggregate_Sum", "Aggregate_Avg"}
)
SUMMED = frozenset({"Aggregate_Sum", "Aggregate_Avg"})
# Modifiers a worker running a query whole evaluates at any depth (a subquery's too)
WHOLE_MODIFIERS = frozenset({"Slice", "Project", "Distinct", "Reduced", "ToMultiSet"})


def whole_refusals(query: Any) -> list[str]:
    """The operators of a query (`parse(text).algebra.algebra`) that a worker cannot run when it
    runs the query whole (`compile_query(..., whole=True)`), in pre-order, each once; empty when
    it can. Besides the fragment, a worker runs whole (a SELECT or an ASK): projection, DISTINCT, ORDER BY
    and LIMIT/OFFSET at any depth, subqueries joined with the rest, HAVING and BIND over their
    results, and GROUP BY of variables with COUNT(*), COUNT of a variable every solution binds
    (one of them), MIN, MAX and SAMPLE of a variable, SUM and AVG of an expression."""
    if query.name not in ("SelectQuery", "AskQuery"):
        return [FORMS.get(query.name) or query.name]
    if _param(query, "datasetClause"):
        return ["FROM"]
    return _unique(_whole(query.p))


def _whole(node: Any) -> Iterator[str]:
    name = node.name
    if server_evaluates(node):
        return
    if name in WHOLE_MODIFIERS:
        yield from _whole(node.p)
    elif name in ("Extend", "Filter", "OrderBy"):
        if name == "Filter":
            for c in conjuncts(node.expr):
                yield from _walk(c.graph if exists_conjunct(c) else c)
        else:
            yield from _walk(node.expr)
        yield from _whole(node.p)
    elif name == "Join":
        yield from _whole(node.p1)
        yield from _whole(node.p2)
    elif name == "AggregateJoin":
        yield from _whole_aggregates(node)
        yield from _whole(node.p.p)
    else:  # a pattern of the fragment with a subquery or group inside (a UNION's branch, say)
        yield from refusals(node) or [refusal(node) or name]


def _whole_aggregates(node: Any) -> Iterator[str]:
    from quanta.sparql.variables import certain

    keys = _param(node.p, "expr") or []
    if not all(isinstance(k, Var) for k in keys):
        yield "GROUP BY"
    counts = 0
    for aggregate in node.A:
        argument = _param(aggregate, "vars")
        counted = aggregate.name == "Aggregate_Count" and (argument == "*" or argument in certain(node.p.p))
        counts += counted
        summed = aggregate.name in SUMMED and isinstance(argument, AlgebraNode | Var)
        if (
            aggregate.name not in WHOLE_AGGREGATES
            or _param(aggregate, "distinct")
            or not (counted or summed or (aggregate.name != "Aggregate_Count" and isinstance(argument, Var)))
            or counts > 1
        ):
            yield refusal(aggregate) or aggregate.name
        elif summed:
            yield from _walk(argument)


# The largest k of an ORDER BY ... LIMIT k answered in partial answers (the rows a quantum keeps)
MAX_TOP = 10_000
# Aggregates a GROUP BY's partial answers reduce to one value per row of the keys (a Tally's)
REDUCED = {"Aggregate_Min": "min", "Aggregate_Max": "max", "Aggregate_Sample": "sample", "Aggregate_Sum": "sum"}


@dataclass(frozen=True)
class Partial:
    """A query below SELECT that the server answers in partial answers per quantum,
    which the client merges: `pattern`, a pattern the server evaluates, and
    - DISTINCT of `variables` (`count` and `order` None, no `reduced`);
    - GROUP BY `variables` (maybe none) with at most one COUNT(*) bound to `count`, and
      MIN, MAX, SAMPLE and SUM of variables (`reduced`: (argument, result, "min" | "max" |
      "sample" | "sum") each; a SUM's partial is of the integers, other values come in rows
      of their own);
    - ORDER BY `order` ((variable, descending) each) LIMIT `limit` of `variables`."""

    pattern: Any
    variables: list[Var]
    count: Var | None = None
    order: list[tuple[Var, bool]] | None = None
    limit: int = 0
    reduced: list[tuple[Var, Var, str]] | None = None


def partial(node: Any) -> Partial | None:
    """The partial answers a SELECT's pattern (`query.p`) may be answered in; None if none."""
    if node.name == "Distinct" and node.p.name == "Project":
        variables = list(node.p.PV)
        if all(isinstance(v, Var) for v in variables) and server_evaluates(node.p.p):
            return Partial(node.p.p, variables)
        return None
    if node.name == "Slice":
        return _top(node)
    if node.name != "Project":
        return None
    results: dict[Var, Var] = {}  # an aggregate's result to the variable the query binds it to
    join = node.p
    while join.name == "Extend" and isinstance(join.expr, Var):
        results[join.expr] = join.var
        join = join.p
    if join.name != "AggregateJoin" or len(results) != len(join.A):
        return None
    keys = _param(join.p, "expr") or []
    count: Var | None = None
    reduced: list[tuple[Var, Var, str]] = []
    for aggregate in join.A:
        argument, result = _param(aggregate, "vars"), results.get(aggregate.res)
        if result is None:
            return None
        if aggregate.name == "Aggregate_Count" and argument == "*" and not _param(aggregate, "distinct"):
            if count is not None:
                return None
            count = result
        elif aggregate.name in REDUCED and isinstance(argument, Var):
            reduced.append((argument, result, REDUCED[aggregate.name]))
        else:
            return None
    if (
        (count is None and not reduced)
        or not all(isinstance(k, Var) for k in keys)
        or sorted(map(str, node.PV)) != sorted(map(str, [*keys, *results.values()]))
        or not server_evaluates(join.p.p)
    ):
        return None
    return Partial(join.p.p, list(keys), count=count, reduced=reduced)


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


def minus_inside(node: Any) -> bool:
    """Whether the server evaluates this MINUS (its sides aside): each variable both sides may
    bind is bound by every solution of the right side, so that a solution of the right side
    found under a left mapping's bindings of them shares a variable with it."""
    from quanta.sparql.variables import certain, maybe

    return maybe(node.p1) & maybe(node.p2) <= certain(node.p2)


def exists_conjunct(expr: Any) -> bool:
    """Whether a FILTER's conjunct is a (NOT) EXISTS the server evaluates: its pattern is inside
    and has no OPTIONAL, MINUS or EXISTS of its own (the server runs it under the filtered
    mapping's bindings, SPARQL's substitution, which those would see differently)."""
    if getattr(expr, "name", None) not in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
        return False
    graph = expr.graph
    return server_evaluates(graph) and not any(
        n.name in ("LeftJoin", "Minus") or (n.name == "Filter" and any(map(_is_exists, conjuncts(n.expr))))
        for n in _patterns(graph)
    )


def conjuncts(expr: Any) -> list[Any]:
    """FILTER(A && B && ...) as [A, B, ...]: a mapping passes the filter when it passes each."""
    if isinstance(expr, AlgebraNode) and expr.name == "ConditionalAndExpression":
        return [c for part in [expr.expr, *(expr.other or ())] for c in conjuncts(part)]
    return [expr]


def _is_exists(expr: Any) -> bool:
    return getattr(expr, "name", None) in ("Builtin_EXISTS", "Builtin_NOTEXISTS")


def _patterns(node: Any) -> Iterator[Any]:
    """A graph pattern and those inside it (not those of EXISTS expressions)."""
    yield node
    for key in ("p", "p1", "p2"):
        child = _param(node, key)
        if isinstance(child, AlgebraNode):
            yield from _patterns(child)


def _walk(node: Any) -> Iterator[str]:
    if isinstance(node, AlgebraNode):
        if node.name == "Filter":  # its EXISTS conjuncts the server evaluates are walked as patterns
            for c in conjuncts(node.expr):
                yield from _walk(c.graph if exists_conjunct(c) else c)
            yield from _walk(node.p)
            return
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


def triple_inside(triple: tuple[Any, Any, Any], triples: Sequence[tuple[Any, Any, Any]]) -> bool:
    """Whether the server evaluates a triple pattern of the BGP `triples`: its predicate is a
    term, or a sequence or inverse chain of terms (`paths.chain`), or a closure (p*, p+, p?) of a
    path without closures of its own with an anchored end (`_anchored`). Other paths
    (alternatives and negated sets outside a closure, closures of closures) are the client's."""
    path = triple[1]
    if chain(path):
        return True
    return isinstance(path, PathRepeat) and _no_closure(path.path) and triple in _anchored(triples)


def _anchored(triples: Sequence[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """The closures of a BGP a worker can run: from an end that is a constant, or a variable a
    pattern of the BGP binds first (a term or chain pattern, or a closure run before)."""
    bound = {t for s, p, o in triples if chain(p) for t in (s, o)}
    closures = [t for t in triples if isinstance(t[1], PathRepeat) and _no_closure(t[1].path)]
    anchored: list[tuple[Any, Any, Any]] = []
    while True:
        ready = [t for t in closures if t not in anchored and any(_constant(e) or e in bound for e in (t[0], t[2]))]
        if not ready:
            return anchored
        anchored += ready
        bound |= {e for t in ready for e in (t[0], t[2])}


def _constant(term: Any) -> bool:
    return not isinstance(term, Var | BlankTerm)


def _no_closure(path: Any) -> bool:
    if isinstance(path, PathRepeat):
        return False
    if isinstance(path, PathInverse):
        return _no_closure(path.arg)
    if isinstance(path, PathSequence | PathAlternative):
        return all(_no_closure(step) for step in path.args)
    return True  # a term, or a negated property set


def _param(node: Any, name: str) -> Any:
    """A node's member, None when absent."""
    return dict.get(node, name)


def _unique(operators: list[str] | Iterator[str]) -> list[str]:
    return list(dict.fromkeys(operators))
