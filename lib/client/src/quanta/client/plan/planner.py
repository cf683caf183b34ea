"""From the query's algebra to the client's operators: the largest server pieces, and the rest here.

A pattern the server evaluates (`quanta.sparql.fragment`) in one graph is one
`Remote` piece. Otherwise, by operator (docs/client.md has the request costs):

- join: triple patterns that only filter a grouped sub-select's groups by
  their key go into its pattern (`_into_group`); the client-side parts are
  evaluated and hash-joined (each sharing a variable with those before it
  when one does: no needless cross product); the server
  parts, joined into one piece, are bind-joined to them (blocks of their
  mappings shipped as VALUES); then property-path closures (from the ends
  bound so far) and SERVICE calls;
- OPTIONAL: in the server's piece when it evaluates both sides (unless the
  client is asked to run it: OptJoin, one query, or BindLeftJoin), else a
  BindLeftJoin when it evaluates the right side, else a hash left join;
- MINUS, FILTER (NOT) EXISTS and property-path closures the server evaluates
  (`fragment.minus_inside`, `fragment.exists_conjunct`, `fragment.triple_inside`):
  in the server's piece with their group; else
- MINUS: a bind anti-join when the server evaluates the right side and every
  shared variable is bound by all its solutions, else a hash anti-join;
- FILTER (NOT) EXISTS: the pattern with the rows' values injected into every
  group (substitution), in blocks; a pattern the server does not evaluate is
  planned and run per distinct row, its values substituted;
- GRAPH ?g: a union over the named graphs, each piece run on its graph;
- ORDER BY, DISTINCT, GROUP BY, aggregates, LIMIT/OFFSET, BIND and FILTER
  of expressions the server lacks: client operators.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from quanta.client.budgets import Budgets
from quanta.client.ops.aggregates import Aggregate
from quanta.client.ops.base import Op
from quanta.client.ops.bind import BindFilter, BindJoin, BindLeftJoin, ExistsColumn, Ship
from quanta.client.ops.exists import SubstitutedExists
from quanta.client.ops.expr import ClientExpr, Extend, Filter, Generate
from quanta.client.ops.graph import GraphUnion
from quanta.client.ops.group import Group
from quanta.client.ops.hashjoin import HashJoin
from quanta.client.ops.optjoin import OptJoin
from quanta.client.ops.order import OrderBy
from quanta.client.ops.paths import End, PathJoin, Steps
from quanta.client.ops.remote import Columns, Piece, Remote, Source, Sources
from quanta.client.ops.service import ServiceCall, ServiceJoin
from quanta.client.ops.standalone import Distinct, Project, Rows, Slice, Union
from quanta.client.plan import costs
from quanta.client.plan.algebra import copy_node, count_uses, has_optional, member, rewrite
from quanta.client.plan.scope import Scope, Slots
from quanta.client.plan.serialize import Writer
from quanta.client.transport import Cardinalities, QueryError
from quanta.sparql import fragment
from quanta.sparql.errors import ErrorKind
from quanta.sparql.paths import expand, join_all
from quanta.sparql.syntax import AlgebraNode, IriTerm, LiteralTerm, RdfTerm, Var
from quanta.sparql.term_rows import Row
from quanta.sparql.terms import from_term, skolem, to_term
from quanta.sparql.variables import all_variables, certain, maybe

TRUE = LiteralTerm("true", datatype="http://www.w3.org/2001/XMLSchema#boolean")
NON_DETERMINISTIC = {"Builtin_RAND": "RAND", "Builtin_UUID": "UUID", "Builtin_STRUUID": "STRUUID"}
# may differ between two evaluations, or is evaluated by a column of its own: an ORDER BY key with
# one is computed for the sort, never read from a SELECT expression's variable (`_bound_as`)
UNREPEATABLE = (*NON_DETERMINISTIC, "Builtin_BNODE", "Builtin_EXISTS", "Builtin_NOTEXISTS")
# a value repeated changes nothing: the workers' tally keeps one per group (its reduction)
ONCE = {"Aggregate_Min": "min", "Aggregate_Max": "max", "Aggregate_Sample": "sample"}
# the tally adds their integers (the rest come as they are): its rows' values are sums
SUMMED = frozenset({"Aggregate_Sum", "Aggregate_Avg"})


@dataclass
class Graphs:
    """The active graph: one source, the merge of several, or none (an empty graph)."""

    sources: list[Source]

    @property
    def single(self) -> Source | None:
        return self.sources[0] if len(self.sources) == 1 else None


@dataclass
class QueryDataset:
    """The RDF dataset a query runs over: its default graph and the graphs GRAPH ranges over
    (FROM and FROM NAMED, else the service's)."""

    default: Graphs
    named: list[str]  # the IRIs GRAPH ranges over


@dataclass
class Planner:
    slots: Slots
    sources: Sources
    dataset: QueryDataset
    budgets: Budgets
    services: set[str]
    hidden: set[Var]  # variables of the plan's own (never shown: SELECT *, COUNT(DISTINCT *))
    uses: Counter[Var] | None  # the query's uses of each variable (`algebra.uses`); None: keep all
    base: str | None
    now: str
    prologue: str
    # OPTIONAL: "server" (in the server's pieces), else the client's: "auto" (OptJoin when possible)
    # or "bind" (BindLeftJoin only)
    strategy: str = "server"
    shipping: bool = True  # GROUP BY and DISTINCT of a server piece in the server's partial answers
    # a graph's file counts (`Transport.cardinalities`), for the choices of `costs`; None: not readable here
    counts: Callable[[str | None], Cardinalities | None] = lambda graph: None
    bnodes: str = field(default_factory=lambda: f"c{secrets.token_hex(4)}x")

    # -- entry points --

    def plan(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        source = graph.single
        if source is not None and self.server(node):
            return Remote(self.piece(node, scope, source))
        method: Callable[[Any, Scope, Graphs], Op] | None = getattr(self, f"_{node.name}", None)
        if method is None:
            raise QueryError(ErrorKind.UNSUPPORTED_OPERATOR, f"the smart client does not know {node.name}")
        return method(node, scope, graph)

    def server(self, node: Any) -> bool:
        """Whether the server evaluates this pattern (a bare VALUES is kept here: nothing to ask)."""
        return node.name not in ("values", "ToMultiSet") and fragment.server_evaluates(node) and self.ours(node)

    def subquery(self, node: Any) -> bool:
        """Whether the server evaluates a subquery (`fragment.select_refusals`) whole."""
        return not fragment.select_refusals(node) and self.ours(node)

    def ours(self, node: Any) -> bool:
        return server_may_run(self.strategy, node)

    # -- server pieces --

    def projection(self, node: Any) -> list[Var]:
        """What a piece projects: its variables, but those used in it alone (nothing else
        reads them: their values need not come back, and the rows' multiplicities stay)."""
        variables = sorted(maybe(node), key=str)
        if self.uses is not None:
            inside = count_uses(node)
            # variables the planner made (a path's steps) are not counted: they stay; and one
            # stays (a query projects something: `SELECT *` would send them all back)
            return [v for v in variables if not 0 < self.uses[v] <= inside[v]] or variables[:1]
        return variables

    def piece(
        self,
        node: Any,
        scope: Scope,
        source: Source,
        *,
        projection: list[Var] | None = None,
        extra: tuple[Var, ...] = (),
        having: Any = None,
        inject: bool = False,
        limit: int | None = None,
        offset: int = 0,
        distinct: bool = False,
        count: Var | None = None,
        order: list[tuple[Var, bool]] | None = None,
        reduced: list[tuple[Var, Var, str]] | None = None,
    ) -> Piece:
        """`distinct`, `count`, `order`, `reduced`: a piece the server answers in partial answers
        (a quantum's DISTINCT, GROUP BY the projection with COUNT(*) bound to `count` and the
        MIN, MAX or SAMPLE (argument, result, "min" | "max" | "sample") of `reduced`, or first
        `limit` rows in this ORDER BY), merged here."""
        selected = self.projection(node) if projection is None else projection
        shown = [*selected, *extra]
        writer = Writer(scope.name, base=self.base)

        def render(values: str) -> str:
            if inject:
                return Writer(scope.name, values, self.base).select(node, shown, limit=limit, offset=offset)
            return writer.select(
                node, selected if count or reduced else shown, top=values, having=having, limit=limit, offset=offset,
                distinct=distinct, count=count, order=order or (), reduced=reduced or (),
            )  # fmt: skip

        results = [result for _, result, _ in reduced or ()]
        if count is not None:
            shown.append(count)
        shown += results
        slots = {scope.name(v): scope.slot(v) for v in shown}
        maybe_slots = frozenset(scope.slot(v) for v in maybe(node) if v in shown) | {scope.slot(v) for v in extra}
        certain_slots = frozenset(scope.slot(v) for v in certain(node) if v in shown)
        if count is not None:
            maybe_slots |= {scope.slot(count)}
            certain_slots |= {scope.slot(count)}
        maybe_slots |= {scope.slot(v) for v in results}
        partial = distinct or count is not None or bool(order) or bool(results)
        return Piece(render, Columns(slots, self.slots, source), maybe_slots, certain_slots, partial)

    def ship(self, slots: list[int], scope: Scope, numbered: bool = False) -> Ship:
        row = scope.fresh("r")
        names = tuple(self.slots.names[s] for s in slots)
        return Ship(tuple(slots), names, str(row), scope.slot(row), numbered)

    # -- graph patterns --

    def _BGP(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        if not node.triples:
            return self.one()
        if not graph.sources:
            return Rows([], self.slots, frozenset(scope.slot(v) for v in maybe(node)))
        # the merge of several graphs: each triple pattern on each graph, deduplicated, then joined
        parts = [AlgebraNode("BGP", triples=[t]) for t in node.triples]
        op: Op | None = None
        for part in parts:
            scan = Distinct(Union([Remote(self.piece(part, scope, s)) for s in graph.sources]))
            op = scan if op is None else HashJoin(op, scan, "join")
        assert op is not None
        return op

    def _Join(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        parts = _into_groups(_flatten(node))
        single = graph.single
        server = [p for p in parts if single is not None and self.server(p)]
        closures = [p for p in parts if p.name == "PathClosure"]
        services = [p for p in parts if p.name == "ServiceGraphPattern"]
        local = [p for p in parts if p not in server and p not in closures and p not in services]
        left: Op | None = None
        for part in _connected(local):
            op = self.plan(part, scope, graph)
            left = op if left is None else HashJoin(left, op, "join")
        if server:
            assert single is not None
            whole = join_all(server)
            if left is None:
                left = Remote(self.piece(whole, scope, single))
            else:
                left = self.bind_join(left, whole, scope, single)
        while closures:
            bound = left.maybe if left is not None else frozenset()
            closure = next((c for c in closures if self._anchored(c, scope, bound)), closures[0])
            closures.remove(closure)
            left = self.path_join(left if left is not None else self.one(), closure, scope, graph)
        for service in services:
            left = self.service_join(left if left is not None else self.one(), service, scope)
        return left if left is not None else self.one()

    def bind_join(self, left: Op, node: Any, scope: Scope, source: Source) -> Op:
        shared = sorted(left.maybe & {scope.slot(v) for v in maybe(node)})
        if not shared:
            return HashJoin(left, Remote(self.piece(node, scope, source)), "join")
        ship = self.ship(shared, scope)
        piece = self.piece(node, scope, source, extra=(Var(ship.row_name),))
        return BindJoin(left, piece, ship)

    def _anchored(self, closure: Any, scope: Scope, bound: frozenset[int]) -> bool:
        ends = (closure.subject, closure.object)
        return any(not isinstance(e, Var) or scope.slot(e) in bound for e in ends)

    def _LeftJoin(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        a, b = node.p1, node.p2
        expr = member(node, "expr")
        if expr is not None and getattr(expr, "name", None) == "TrueFilter":
            expr = None
        source = graph.single
        shippable = expr is None or not fragment.refusals(expr)
        if source is not None and self.server(a) and self.server(b) and shippable and self.strategy != "bind":
            op = self.opt_join(a, b, expr, scope, source)
            if op is not None:
                return op
        left = self.plan(a, scope, graph)
        keep = None
        if expr is not None and not shippable:
            keep = self.condition(expr, scope)
        if source is not None and self.server(b):
            right_vars = {scope.slot(v) for v in maybe(b)}
            expr_vars = {scope.slot(v) for v in _expr_variables(expr)} if expr is not None and shippable else set()
            shared = sorted(left.maybe & (right_vars | expr_vars))
            if shared:
                ship = self.ship(shared, scope)
                having = expr if shippable else None
                piece = self.piece(b, scope, source, extra=(Var(ship.row_name),), having=having)
                return BindLeftJoin(left, piece, ship, keep)
            if shippable and expr is not None:
                keep = self.condition(expr, scope)
            return HashJoin(left, Remote(self.piece(b, scope, source)), "left", keep)
        if shippable and expr is not None:
            keep = self.condition(expr, scope)
        return HashJoin(left, self.plan(b, scope, graph), "left", keep)

    def opt_join(self, a: Any, b: Any, expr: Any, scope: Scope, source: Source) -> Op | None:
        """OptJoin, when each row of A is told by its values: no variable that
        A may leave unbound is one B binds."""
        if (maybe(a) - certain(a)) & maybe(b):
            return None
        tag = scope.fresh("t")
        joined: Any = AlgebraNode("Join", p1=a, p2=b)
        if expr is not None:
            joined = AlgebraNode("Filter", expr=expr, p=joined)
        union = AlgebraNode("Union", p1=joined, p2=AlgebraNode("Extend", p=a, var=tag, expr=TRUE))  # the join first
        key = self.projection(a)
        shown = sorted(set(key) | set(self.projection(b)), key=str)
        piece = self.piece(union, scope, source, projection=shown, extra=(tag,))
        certain_slots = frozenset(scope.slot(v) for v in certain(a))
        return OptJoin(piece, [scope.slot(v) for v in key], scope.slot(tag), self.slots, certain_slots)

    def _Minus(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        left = self.plan(node.p1, scope, graph)
        b = node.p2
        right_vars = {scope.slot(v) for v in maybe(b)}
        shared = sorted(left.maybe & right_vars)
        if not shared:
            return left  # no shared variable: MINUS removes nothing
        source = graph.single
        if source is not None and self.server(b) and set(shared) <= {scope.slot(v) for v in certain(b)}:
            ship = self.ship(shared, scope, numbered=True)
            piece = self.piece(b, scope, source, projection=[], extra=(Var(ship.row_name),))
            return BindFilter(left, piece, ship, negated=True, name="BindMinus", keep_unbound=True)
        return HashJoin(left, self.plan(b, scope, graph), "minus")

    def _Filter(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        pattern, conjuncts = node.p, fragment.conjuncts(node.expr)
        pushed = [c for c in conjuncts if _pushable(c)]
        for c in pushed:  # into the side of a join or OPTIONAL that binds all it reads
            moved = _push(pattern, c)
            if moved is not None:
                pattern = moved
                conjuncts.remove(c)
        if not conjuncts:
            return self.plan(pattern, scope, graph)
        child = self.plan(pattern, scope, graph)
        tests: list[Any] = []
        for c in conjuncts:
            name = getattr(c, "name", None)
            if name in ("Builtin_EXISTS", "Builtin_NOTEXISTS") and graph.single is not None and self.server(c.graph):
                if tests:
                    child = self.filter(child, tests, scope, graph)
                    tests = []
                child = self.exists_filter(child, c.graph, scope, graph.single, negated=name == "Builtin_NOTEXISTS")
            elif name != "TrueFilter":
                tests.append(c)
        return self.filter(child, tests, scope, graph) if tests else child

    def filter(self, child: Op, tests: list[Any], scope: Scope, graph: Graphs) -> Op:
        compiled = []
        for test in tests:
            child, rewritten = self.client_expr(test, scope, graph, child)
            compiled.append(self.compile(rewritten, scope))
        return Filter(child, compiled)

    def exists_filter(self, child: Op, pattern: Any, scope: Scope, source: Source, negated: bool) -> Op:
        ship = self.ship(sorted(child.maybe & {scope.slot(v) for v in _all_vars(pattern)}), scope, numbered=True)
        piece = self.piece(pattern, scope, source, projection=[], extra=(Var(ship.row_name),), inject=True)
        return BindFilter(child, piece, ship, negated=negated, name="NotExists" if negated else "Exists")

    def _Extend(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        child = self.plan(node.p, scope, graph)
        child, expr = self.client_expr(node.expr, scope, graph, child)
        return Extend(child, scope.slot(node.var), self.compile(expr, scope))

    def _Union(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        return Union([self.plan(b, scope, graph) for b in _branches(node)])

    def _values(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        variables = sorted(maybe(node), key=str)
        rows = [
            {scope.slot(v): from_term(t) for v in variables if (t := res.get(v)) is not None and t != "UNDEF"}
            for res in node.res
        ]
        return Rows(rows, self.slots, frozenset(scope.slot(v) for v in variables))

    def _ToMultiSet(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        return self.plan(node.p, scope, graph)

    def _Graph(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        term = node.term
        if isinstance(term, Var):
            slot = scope.slot(term)
            branches = [(g, self.plan(node.p, scope, Graphs([self.sources.get(g)]))) for g in self.dataset.named]
            if not branches:
                return Rows([], self.slots, frozenset({slot}) | {scope.slot(v) for v in maybe(node.p)})
            return GraphUnion(branches, slot)
        iri = from_term(term)
        if iri not in self.dataset.named:  # SPARQL: a graph the dataset lacks matches nothing
            return Rows([], self.slots, frozenset(scope.slot(v) for v in maybe(node.p)))
        return self.plan(node.p, scope, Graphs([self.sources.get(iri)]))

    def _PathClosure(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        return self.path_join(self.one(), node, scope, graph)

    def path_join(self, left: Op, node: Any, scope: Scope, graph: Graphs) -> Op:
        """Every operator a closure's steps need is planned here, once (slots
        are all given before the query runs); at run time they are only combined."""
        a, b = self.hidden_var(scope, "a"), self.hidden_var(scope, "z")
        step = expand(a, node.path, b, lambda hint: self.hidden_var(scope, hint))
        slot_a, slot_b = scope.slot(a), scope.slot(b)
        single = graph.single
        every_step = self.plan(step, scope, graph)
        bind: dict[bool, tuple[Piece, Ship]] = {}
        if single is not None and self.server(step):
            for forward in (True, False):
                ship = self.ship([slot_a if forward else slot_b], scope)
                piece = self.piece(step, scope, single, projection=[a, b], extra=(Var(ship.row_name),))
                bind[forward] = (piece, ship)

        def make(rows: list[Row], forward: bool) -> Op:
            if not rows:
                return every_step
            start = Rows([{slot_a if forward else slot_b: r[slot_a if forward else slot_b] or ""} for r in rows],
                         self.slots, frozenset({slot_a if forward else slot_b}))  # fmt: skip
            if forward in bind:
                piece, ship = bind[forward]
                return BindJoin(start, piece, ship)
            return HashJoin(start, every_step, "join")

        nodes = self.plan(AlgebraNode("BGP", triples=[(a, self.hidden_var(scope, "p"), b)]), scope, graph)
        # whether a node is in the graph: a subject or an object of some triple
        p, x = self.hidden_var(scope, "p"), self.hidden_var(scope, "x")
        somewhere = AlgebraNode(
            "Union", p1=AlgebraNode("BGP", triples=[(a, p, x)]), p2=AlgebraNode("BGP", triples=[(x, p, a)])
        )
        every_node = self.plan(somewhere, scope, graph)
        in_graph: tuple[Piece, Ship] | None = None
        if single is not None:
            ship = self.ship([slot_a], scope, numbered=True)
            in_graph = (self.piece(somewhere, scope, single, projection=[], extra=(Var(ship.row_name),)), ship)

        def member(rows: list[Row]) -> Op:
            start = Rows([{slot_a: r[slot_a] or ""} for r in rows], self.slots, frozenset({slot_a}))
            if in_graph is not None:
                return BindJoin(start, *in_graph)
            return HashJoin(start, every_node, "join")

        steps = Steps(make, slot_a, slot_b, self.slots, member)
        return PathJoin(left, self.end(node.subject, scope), self.end(node.object, scope), str(node.mod), steps, nodes)

    def end(self, node: RdfTerm, scope: Scope) -> End:
        return End(slot=scope.slot(node)) if isinstance(node, Var) else End(term=from_term(node))

    def hidden_var(self, scope: Scope, hint: str) -> Var:
        var = scope.fresh(hint)
        self.hidden.add(var)
        return var

    def _ServiceGraphPattern(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        return self.service_join(self.one(), node, scope)

    def service_join(self, left: Op, node: Any, scope: Scope) -> Op:
        text = str(node.service_string)
        group = text[text.index("{") :]
        variables = sorted(set(_all_vars(node.graph)), key=str)
        term = node.term
        call = ServiceCall(
            endpoint=None if isinstance(term, Var) else from_term(term),
            endpoint_slot=scope.slot(term) if isinstance(term, Var) else None,
            group=group,
            prologue=self.prologue,
            slots={str(v): scope.slot(v) for v in variables},
            silent=bool(member(node, "silent")),
            row_name=str(scope.fresh("r")),
        )
        return ServiceJoin(left, call, self.slots, frozenset(scope.slot(v) for v in variables))

    # -- solution modifiers and subqueries --

    def _Project(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        variables = [v for v in node.PV if isinstance(v, Var)]
        inner = scope.child(variables)
        source = graph.single
        if source is not None and self.subquery(node):
            return Remote(self.piece(node.p, inner, source, projection=variables))
        child = self.plan(node.p, inner, graph)
        return Project(child, [scope.slot(v) for v in variables], self.slots)

    def _Slice(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        offset, limit = node.start or 0, member(node, "length")
        inner = node.p
        source = graph.single
        if source is not None and inner.name == "Project" and self.subquery(node):
            variables = [v for v in inner.PV if isinstance(v, Var)]
            child_scope = scope.child(variables)
            piece = self.piece(inner.p, child_scope, source, projection=variables, limit=limit, offset=offset)
            return Remote(piece)
        if limit is not None and inner.name == "Project" and inner.p.name == "OrderBy":
            variables = [v for v in inner.PV if isinstance(v, Var)]
            child_scope = scope.child(variables)
            ordered = self.order_by(inner.p, child_scope, graph, top=offset + limit)
            child: Op = Project(ordered, [scope.slot(v) for v in variables], self.slots)
        else:
            child = self.plan(inner, scope, graph)
        return Slice(child, offset, limit)

    def _Distinct(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        """A DISTINCT of a pattern the server evaluates: each quantum's rows come distinct
        (the server's partial DISTINCT), and rows that come again are dropped here."""
        inner, source = node.p, graph.single
        if self.shipping and source is not None and inner.name == "Project" and inner.PV and self.subquery(inner):
            variables = [v for v in inner.PV if isinstance(v, Var)]
            piece = self.piece(inner.p, scope.child(variables), source, projection=variables, distinct=True)
            return Distinct(Remote(piece))
        return Distinct(self.plan(node.p, scope, graph))

    def _Reduced(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        return self.plan(node.p, scope, graph)  # REDUCED allows every duplicate to stay

    def _OrderBy(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        return self.order_by(node, scope, graph, top=None)

    def order_by(self, node: Any, scope: Scope, graph: Graphs, top: int | None) -> Op:
        if top is not None and (shipped := self.shipped_top(node, scope, graph, top)) is not None:
            return shipped
        child = self.plan(node.p, scope, graph)
        conditions: list[tuple[int, bool]] = []
        for condition in node.expr:
            expr = (
                condition.expr
                if isinstance(condition, AlgebraNode) and condition.name == "OrderCondition"
                else condition
            )
            descending = isinstance(condition, AlgebraNode) and member(condition, "order") == "DESC"
            if not isinstance(expr, Var):
                expr = _bound_as(expr, node.p) or expr
            if isinstance(expr, Var):
                conditions.append((scope.slot(expr), descending))
                continue
            key = self.hidden_var(scope, "k")
            child, rewritten = self.client_expr(expr, scope, graph, child)
            child = Extend(child, scope.slot(key), self.compile(rewritten, scope))
            conditions.append((scope.slot(key), descending))
        return OrderBy(child, conditions, top)

    def shipped_top(self, node: Any, scope: Scope, graph: Graphs, top: int) -> Op | None:
        """ORDER BY ... LIMIT of a pattern the server evaluates, with keys it evaluates: each
        quantum hands on its first `top` rows (keys that are expressions computed by BINDs in
        the piece), and the first `top` of all are kept here. None when not shipped."""
        source, pattern = graph.single, node.p
        keys: list[tuple[Any, bool]] = []
        for condition in node.expr:
            ordered = isinstance(condition, AlgebraNode) and condition.name == "OrderCondition"
            keys.append((condition.expr if ordered else condition, ordered and member(condition, "order") == "DESC"))
        if (
            not self.shipping
            or source is None
            or top > fragment.MAX_TOP
            or not self.server(pattern)
            or not all(isinstance(e, Var) or fragment.server_evaluates(e) for e, _ in keys)
        ):
            return None
        order: list[tuple[Var, bool]] = []
        for expr, descending in keys:
            if not isinstance(expr, Var):
                var = self.hidden_var(scope, "k")
                pattern = AlgebraNode("Extend", p=pattern, var=var, expr=expr)
                expr = var
            order.append((expr, descending))
        shown = [*self.projection(node.p), *(v for v, _ in order if v in self.hidden)]
        piece = self.piece(pattern, scope, source, projection=shown, order=order, limit=top)
        return OrderBy(Remote(piece), [(scope.slot(v), d) for v, d in order], top)

    def _AggregateJoin(self, node: Any, scope: Scope, graph: Graphs) -> Op:
        shipped = self.shipped_group(node, scope, graph)
        if shipped is not None:
            return shipped
        group = node.p
        child = self.plan(group.p, scope, graph)
        visible = sorted(s for s in child.maybe if self.slots.names[s] not in {str(h) for h in self.hidden})
        keys: list[int] = []
        bound: list[int] = []
        for expr in member(group, "expr") or []:
            if isinstance(expr, Var):
                keys.append(scope.slot(expr))
                bound.append(scope.slot(expr))
                continue
            key = self.hidden_var(scope, "g")
            child, rewritten = self.client_expr(expr, scope, graph, child)
            child = Extend(child, scope.slot(key), self.compile(rewritten, scope))
            keys.append(scope.slot(key))
        aggregates = []
        for a in node.A:
            kind = a.name.removeprefix("Aggregate_")
            arg = member(a, "vars")
            compiled = None
            if arg != "*":
                child, rewritten = self.client_expr(arg, scope, graph, child)
                compiled = self.compile(rewritten, scope)
            separator = member(a, "separator")
            aggregates.append(
                Aggregate(
                    kind,
                    compiled,
                    bool(member(a, "distinct")),
                    scope.slot(a.res),
                    " " if separator is None else str(separator),
                    visible,
                )
            )
        return Group(child, keys, bound, aggregates, self.slots)

    def shipped_group(self, node: Any, scope: Scope, graph: Graphs) -> Op | None:
        """GROUP BY over a pattern the server evaluates, with keys and aggregate arguments
        it evaluates too: the server tallies, per quantum, each distinct row of the keys and
        the arguments (computed by BINDs in the piece) with how many times it came (a
        partial COUNT(*)), and the aggregates are computed here from those rows, each
        weighed by its count (*Processing SPARQL Aggregate Queries with Web Preemption*).
        None when the group is not shipped (the rows come here, as for any pattern)."""
        group, source = node.p, graph.single
        pattern = group.p
        keys = member(group, "expr") or []
        arguments = [member(a, "vars") for a in node.A]
        if not self.shipping or source is None:
            return None
        # A sub-select of one row joined to the pattern (BSBM's "more than 1.5 times the average"):
        # each group is that row beside the pattern's group, so the pattern's tally is shipped and
        # the row joined to it here; aggregates of the row's variables are computed here.
        side, pattern = (None, pattern) if self.server(pattern) else _one_row_side(pattern)
        beside = frozenset(maybe(side)) if side is not None else frozenset()
        here = [a != "*" and bool(_expr_variables(a) & beside) for a in arguments]
        if (
            not self.server(pattern)
            or not all(_expr_variables(e).isdisjoint(beside) for e in keys)
            or not all(isinstance(e, Var) or fragment.server_evaluates(e) for e in keys)
            or not all(
                (_expr_variables(a) <= beside) if h else (a == "*" or fragment.server_evaluates(a))
                for a, h in zip(arguments, here, strict=True)
            )
            or any(a == "*" and member(agg, "distinct") for a, agg in zip(arguments, node.A, strict=True))
            or (side is not None and any(member(a, "distinct") for a in node.A))
        ):
            return None
        # DISTINCT aggregates (beside MIN, MAX and SAMPLE only) need the distinct rows only:
        # the server's partial DISTINCT, then a DISTINCT here, which spills (one argument: the
        # aggregates then keep no set of values of their own). Beside other aggregates, their
        # values would go into the tally as they are: one per solution, when they are entities
        # (COUNT(DISTINCT ?review)), where a tally reduces nothing and costs a count a row
        # (measured: 1.4 to 2 times the time of shipping the rows). Those groups ship rows.
        # MIN, MAX and SAMPLE otherwise are the tally's: one value per row of the keys.
        once = any(member(a, "distinct") for a in node.A)
        choice = None  # the cost model's estimate, when it decided (`costs.tally`)
        if once and not all(member(a, "distinct") or a.name in ONCE for a in node.A):
            variables = [*keys, *(a for a in arguments if a != "*")]
            if not all(isinstance(v, Var) for v in variables):
                return None
            choice = costs.tally(pattern, list(dict.fromkeys(variables)), self.counts(source.graph))
            if choice is None or not choice.reduces:
                return None
            once = False
        always = certain(pattern)
        key_vars: list[Var] = []
        for expr in keys:
            if not isinstance(expr, Var):
                var = self.hidden_var(scope, "g")
                pattern = AlgebraNode("Extend", p=pattern, var=var, expr=expr)
                expr = var
            key_vars.append(expr)
        tallied = list(dict.fromkeys(key_vars))
        shipped: list[Var | str] = []  # each aggregate's argument: a variable of the piece, or "*"
        bound_args: list[tuple[Any, Var]] = []  # argument expressions and the variables BINDs give them
        reduced: list[tuple[Var, Var, str]] = []  # the tally's MIN, MAX and SAMPLE: (argument, result, how)
        for agg, arg, computed_here in zip(node.A, arguments, here, strict=True):
            if computed_here:
                shipped.append(arg)
                continue
            if agg.name == "Aggregate_Count" and not member(agg, "distinct") and arg != "*":
                # COUNT(e) counts the rows where e has a value: one value ships for all of them
                arg = (
                    "*"
                    if isinstance(arg, Var) and arg in always
                    else AlgebraNode("Builtin_sameTerm", arg1=arg, arg2=arg)
                )
            if arg != "*" and not isinstance(arg, Var):
                computed = next((var for expr, var in bound_args if expr == arg), None)  # SUM(e) and AVG(e): one e
                if computed is None:
                    computed = self.hidden_var(scope, "a")
                    pattern = AlgebraNode("Extend", p=pattern, var=computed, expr=arg)
                    bound_args.append((arg, computed))
                arg = computed
            how = "sum" if agg.name in SUMMED and choice is None and arg != "*" else ONCE.get(agg.name)
            if not once and how is not None:
                result = next((r for a, r, h in reduced if (a, h) == (arg, how)), None)  # SUM and AVG of one e
                if result is None:
                    result = self.hidden_var(scope, "r")
                    reduced.append((arg, result, how))
                arg = result
            elif arg != "*" and arg not in tallied:
                tallied.append(arg)
            shipped.append(arg)
        counted = not once and any(agg.name not in ONCE for agg in node.A)  # a SUM's too: AVG divides by it
        count = self.hidden_var(scope, "m") if counted else None
        # the piece first: it gives the variables their slots, which the expressions below read
        piece = self.piece(pattern, scope, source, projection=tallied, distinct=once, count=count, reduced=reduced)
        deduplicated = once and len(set(shipped)) == 1
        aggregates = []
        summed = {r for _, r, how in reduced if how == "sum"}
        row = None if side is None else self.plan(side, scope, graph)  # its variables' slots, before compiling
        for agg, arg, computed_here in zip(node.A, shipped, here, strict=True):
            separator = member(agg, "separator")
            aggregates.append(
                Aggregate(
                    agg.name.removeprefix("Aggregate_"),
                    None if arg == "*" else self.compile(arg, scope),
                    bool(member(agg, "distinct")) and not deduplicated,
                    scope.slot(agg.res),
                    " " if separator is None else str(separator),
                    summed=not computed_here and arg in summed,
                )
            )
        keys_slots, bound = [scope.slot(k) for k in key_vars], [scope.slot(k) for k in keys if isinstance(k, Var)]
        if once:
            return Group(Distinct(Remote(piece)), keys_slots, bound, aggregates, self.slots)
        times = None if count is None else scope.slot(count)
        tally: Op = Remote(piece) if row is None else HashJoin(row, Remote(piece), "join")
        return Group(tally, keys_slots, bound, aggregates, self.slots, times, "" if choice is None else str(choice))

    # -- expressions --

    def compile(self, expr: Any, scope: Scope) -> ClientExpr:
        return ClientExpr(expr, lambda v: scope.of.get(v), self.slots, self.base)

    def condition(self, expr: Any, scope: Scope) -> Callable[[Row], bool]:
        """An OPTIONAL's condition, on merged rows (no EXISTS inside: see client_expr)."""
        if _has(expr, ("Builtin_EXISTS", "Builtin_NOTEXISTS")):
            raise QueryError(ErrorKind.UNSUPPORTED_OPERATOR, "EXISTS in an OPTIONAL's FILTER", operator="EXISTS")
        rewritten = rewrite(expr, self._constant_change)
        test = self.compile(rewritten, scope)
        return test.test

    def _constant_change(self, node: Any) -> Any:
        if isinstance(node, AlgebraNode) and node.name == "Builtin_NOW":
            return LiteralTerm(self.now[1 : self.now.rindex('"')], datatype=IriTerm(_XSD_DATETIME))
        return None

    def client_expr(self, expr: Any, scope: Scope, graph: Graphs, child: Op) -> tuple[Op, Any]:
        """`expr` with what the expression compiler lacks made hidden variables,
        and `child` with the operators that bind them."""
        generated: list[tuple[int, str]] = []
        exists: list[tuple[Var, Any]] = []

        def change(node: Any) -> Any:
            if not isinstance(node, AlgebraNode):
                return None
            name = node.name
            if name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
                var = self.hidden_var(scope, "e")
                exists.append((var, node.graph))
                return var if name == "Builtin_EXISTS" else AlgebraNode("UnaryNot", expr=var)
            if name == "Builtin_NOW":
                return self._constant_change(node)
            if name in NON_DETERMINISTIC or (name == "Builtin_BNODE" and member(node, "arg") is None):
                var = self.hidden_var(scope, "n")
                generated.append((scope.slot(var), NON_DETERMINISTIC.get(name, "BNODE")))
                return var
            if name == "Function" and fragment.refusal(node) is not None:
                var = self.hidden_var(scope, "f")  # an unknown function: an error, always
                generated.append((scope.slot(var), "unbound"))
                return var
            return None

        rewritten = rewrite(expr, change)
        for var, pattern in exists:
            child = self.exists_column(child, pattern, scope, graph, scope.slot(var))
        if generated:
            child = Generate(child, generated, self.bnodes)
        return child, rewritten

    def exists_column(self, child: Op, pattern: Any, scope: Scope, graph: Graphs, slot: int) -> Op:
        source = graph.single
        pattern_slots = {scope.slot(v) for v in _all_vars(pattern)}
        if source is not None and self.server(pattern):
            ship = self.ship(sorted(child.maybe & pattern_slots), scope, numbered=True)
            piece = self.piece(pattern, scope, source, projection=[], extra=(Var(ship.row_name),), inject=True)
            return ExistsColumn(child, piece, ship, slot)
        slots = sorted(child.maybe & pattern_slots)
        variables = {scope.slot(v): v for v in _all_vars(pattern)}

        def substitute(values: tuple[tuple[int, str], ...]) -> Op:
            bound = {variables[s]: to_node(term) for s, term in values}
            substituted = rewrite(pattern, lambda n: bound.get(n) if isinstance(n, Var) else None)
            planner = replace(self, slots=Slots(self.slots.taken), hidden=set(self.hidden))
            return planner.plan(substituted, Scope(planner.slots), graph)

        return SubstitutedExists(child, slots, slot, substitute)

    # -- helpers --

    def one(self) -> Op:
        """The pattern with one empty solution ({})."""
        return Rows([{}], self.slots)


_XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"


def server_may_run(strategy: str, node: Any) -> bool:
    """False when the pattern has an OPTIONAL that the client is asked to run itself
    (`strategy` "auto" or "bind", not "server")."""
    return strategy == "server" or not has_optional(node)


def to_node(term: str) -> RdfTerm:
    """A term as a constant of a pattern (a blank node of the data by the IRI that names it)."""
    return IriTerm(skolem(term)) if term.startswith("_:") else to_term(term)


def _flatten(node: Any) -> list[Any]:
    if node.name == "Join":
        return _flatten(node.p1) + _flatten(node.p2)
    return [node]


def _connected(parts: list[Any]) -> list[Any]:
    """`parts` in an order where each shares a variable with those before it when one does
    (a join is commutative): hash joins on keys rather than cross products (BSBM's business
    intelligence Q5 joins a group by country to one by product, then to one by both)."""
    if len(parts) < 3:
        return parts
    ordered, rest = parts[:1], parts[1:]
    seen = set(maybe(parts[0]))
    while rest:
        chosen = next((i for i, p in enumerate(rest) if not seen.isdisjoint(maybe(p))), 0)
        ordered.append(rest.pop(chosen))
        seen |= set(maybe(ordered[-1]))
    return ordered


def _into_groups(parts: list[Any]) -> list[Any]:
    """`parts` with each part that filters a grouped sub-select's groups by their key moved into
    the sub-select's pattern (`_into_group`), where the server runs it with the group."""
    out = list(parts)
    for part in parts:
        for i, sub in enumerate(out):
            merged = None if sub is part else _into_group(part, sub)
            if merged is not None:
                out[i] = merged
                out.remove(part)
                break
    return out


def _into_group(part: Any, sub: Any) -> Any | None:
    """`sub`, a sub-select grouped by ?k (projected as it is), with `part` joined into its group's
    pattern, when that is the join of the two (BSBM's business-intelligence Q2: `?p a
    bsbm:Product` beside a count of features grouped by ?p): `part` is triple patterns whose
    only variable is ?k, filtered on ?k alone, so it has one solution per value of ?k at most,
    and the pattern binds ?k in all its solutions. Then each group of the join is a group of
    the sub-select whose key `part` has, and its aggregates are the same. None otherwise."""
    tests: list[Any] = []
    while part.name == "Filter":
        tests.append(part.expr)
        part = part.p
    if part.name != "BGP" or not part.triples or any(isinstance(x, AlgebraNode) for t in part.triples for x in t):
        return None  # a path may repeat a solution
    names = {v for t in part.triples for v in t if isinstance(v, Var)}
    if len(names) != 1 or not all(_pushable(t) and _expr_variables(t) <= names for t in tests):
        return None
    (key,) = names
    path, node = _beneath_projection(sub)
    if any((n.name == "Project" and key not in n.PV) or (n.name == "Extend" and n.var == key) for n in path):
        return None
    if node.name != "AggregateJoin" or key not in (member(node.p, "expr") or []) or key not in certain(node.p.p):
        return None
    inner = AlgebraNode("Join", p1=part, p2=node.p.p)
    for test in tests:
        inner = AlgebraNode("Filter", expr=test, p=inner)
    node = copy_node(node, p=copy_node(node.p, p=inner))
    for outer in reversed(path):
        node = copy_node(outer, p=node)
    return node


def _one_row_side(pattern: Any) -> tuple[Any, Any]:
    """(a sub-select of exactly one row, the rest) when `pattern` joins one such to parts that
    share no variable with it, else (None, `pattern`). Aggregates without GROUP BY (nor HAVING,
    LIMIT...) give one row whatever the data."""
    parts = _flatten(pattern)
    ones = [p for p in parts if _one_row(p)]
    if len(ones) != 1 or len(parts) == 1:
        return None, pattern
    rest = join_all([p for p in parts if p is not ones[0]])
    if not set(maybe(ones[0])).isdisjoint(all_variables(rest)):
        return None, pattern
    return ones[0], rest


def _one_row(node: Any) -> bool:
    _, node = _beneath_projection(node)
    return node.name == "AggregateJoin" and not member(node.p, "expr")


def _beneath_projection(node: Any) -> tuple[list[Any], Any]:
    """A sub-select's wrappers (its projection and SELECT expressions), outermost first, and
    what they wrap (an AggregateJoin when it aggregates)."""
    path = []
    while node.name in ("ToMultiSet", "Project", "Extend"):
        path.append(node)
        node = node.p
    return path, node


def _branches(node: Any) -> list[Any]:
    if node.name == "Union":
        return _branches(node.p1) + _branches(node.p2)
    return [node]


def _pushable(expr: Any) -> bool:
    """A FILTER conjunct that may move into a part of its group: one the server
    evaluates (no EXISTS, whose pattern may read the other parts)."""
    return not fragment.refusals(expr) and getattr(expr, "name", None) != "TrueFilter"


def _push(node: Any, expr: Any) -> Any:
    """`node` with `expr` filtering the part (left of an OPTIONAL, either side
    of a join) that binds every variable it reads in all its solutions (the
    filter then sees the same values there), as deep as it goes; None if no
    part does. FILTER(e, A ⟕ B) = FILTER(e, A) ⟕ B and FILTER(e, A ⋈ B) =
    FILTER(e, A) ⋈ B when A binds all of e's variables."""
    needed = _expr_variables(expr)
    if node.name in ("Join", "LeftJoin"):
        sides = ["p1", "p2"] if node.name == "Join" else ["p1"]
        for side in sides:
            part = node[side]
            if needed <= certain(part):
                inner = _push(part, expr)
                return copy_node(
                    node, **{side: inner if inner is not None else AlgebraNode("Filter", expr=expr, p=part)}
                )
    return None


def _bound_as(expr: Any, node: Any) -> Var | None:
    """The variable a SELECT expression right under ORDER BY (in `node`, its child) binds to
    `expr` itself, for the sort to read rather than compute `expr` again (BSBM's `ORDER BY
    DESC(?a / ?b)` beside `SELECT (?a / ?b AS ?ratio)`); None if there is none, if `expr` may
    differ between two evaluations, or if a SELECT expression above that one binds a variable of
    `expr` (the ORDER BY sees its value, the one below does not)."""
    above: set[Var] = set()
    while isinstance(node, AlgebraNode) and node.name == "Extend":
        if node.expr == expr:
            repeatable = above.isdisjoint(all_variables(expr)) and not _has(expr, UNREPEATABLE)
            return node.var if repeatable else None
        above.add(node.var)
        node = node.p
    return None


def _expr_variables(expr: Any) -> set[Var]:
    return set(all_variables(expr))


def _all_vars(node: Any) -> list[Var]:
    return list(dict.fromkeys(all_variables(node)))


def _has(expr: Any, names: tuple[str, ...]) -> bool:
    found = False

    def look(node: Any) -> Any:
        nonlocal found
        if isinstance(node, AlgebraNode) and node.name in names:
            found = True
            return node
        return None

    rewrite(expr, look)
    return found


__all__ = ["Graphs", "Planner", "QueryDataset", "copy_node"]
