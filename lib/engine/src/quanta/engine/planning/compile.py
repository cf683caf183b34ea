"""Compile the query's SPARQL algebra (`quanta.sparql.syntax`) into a preemptable physical plan.

What the server evaluates is decided by `quanta.sparql.fragment`: anything
else is refused first (UnsupportedQuery naming the operator the smart client
must run), so what is refused never depends on the data. The fragment: BGP,
multiset UNION, OPTIONAL (a LeftJoin), FILTER over pure expressions, FILTER (NOT) EXISTS
and MINUS (a SemiJoin), property-path closures with an anchored end (a Closure), BIND, VALUES, SELECT
projection, LIMIT/OFFSET at the top, ASK (as LIMIT 1); and, for a query
asked for partial answers, a DISTINCT or a GROUP BY with COUNT(*) (a Tally), or an
ORDER BY ... LIMIT (a TopK). A query run whole (`fragment.whole_refusals` admits it) may also
have subqueries (hash-joined), GROUP BY with COUNT, MIN, MAX or SAMPLE, HAVING, DISTINCT and
ORDER BY at any depth (an exact Tally or TopK): its answer is complete or none (`whole`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators import (
    Closure,
    HashJoin,
    IndexJoin,
    LeftJoin,
    Operator,
    Scan,
    SemiJoin,
    Slice,
    Tally,
    TopK,
    Union,
    Values,
)
from quanta.engine.plan import ASK, SELECT, Plan
from quanta.engine.planning.planner import Component, plan_join
from quanta.engine.planning.ranges import ObjectRange, date_ranges
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore
from quanta.sparql import fragment
from quanta.sparql.errors import UnsupportedQuery
from quanta.sparql.parse import ParsedQuery, bounded, read
from quanta.sparql.paths import expand
from quanta.sparql.syntax import (
    AlgebraNode,
    BlankTerm,
    PathInverse,
    PathRepeat,
    PathSequence,
    PropertyPath,
    RdfTerm,
    Var,
)
from quanta.sparql.term_table import TermTable
from quanta.sparql.terms import from_term
from quanta.sparql.variables import all_variables, maybe

Triple = tuple[RdfTerm, RdfTerm | PropertyPath, RdfTerm]


def compile_query(text: str, store: TripleStore, partial: bool = False, whole: bool = False) -> Plan:
    """Parse (shape-cached) and compile a query against a dataset, within
    `quanta.sparql.bounds`: on a parse thread, under the parse budget (the
    compiler walks the tree as deep as the parser), a refusal remembered.
    `partial`: a DISTINCT or a GROUP BY with COUNT(*) the fragment admits
    (`fragment.tally`) is answered per quantum (`Tally`), for the client to merge.
    `whole`: the query is run whole, every operator here (`Compiler.tail`)."""
    return bounded(lambda: Compiler(read(text), store, partial=partial, whole=whole).compile(), text)


# Modifiers and groups a query run whole evaluates besides the fragment's patterns
TAIL = frozenset({"Slice", "Project", "Distinct", "Reduced", "OrderBy", "AggregateJoin"})
# k of an exact top-k that orders every row (it holds at most SORTED_ROWS, natively)
EVERY_ROW = 1 << 40


@dataclass
class Compiler:
    parsed: ParsedQuery
    store: TripleStore
    partial: bool = False
    whole: bool = False
    names: list[str] = field(default_factory=list)
    # a subquery's own variables (those it does not project), renamed apart while it compiles
    local: dict[RdfTerm, RdfTerm] = field(default_factory=dict)
    slots: dict[RdfTerm, int] = field(default_factory=dict)
    # while an EXISTS pattern compiles: the filtered pattern's variables, which its expressions see too
    injected: frozenset[Var] = frozenset()

    def __post_init__(self) -> None:
        self.base = self.parsed.algebra.prologue.base  # IRI() resolves relative IRIs against it
        self.terms = TermTable(self.store)
        self.ctx = Context(self.store, Quantum(None), self.terms, 0)

    # -- variables and terms --

    def slot(self, var: RdfTerm) -> int:
        var = self.local.get(var, var)
        slot = self.slots.get(var)
        if slot is None:
            slot = self.slots[var] = len(self.names)
            self.names.append(str(var) if isinstance(var, Var) else f"_:{var}")
        return slot

    def term(self, node: RdfTerm) -> int:
        return self.terms.intern(from_term(node))

    # -- query forms and modifiers --

    def compile(self) -> Plan:
        query = self.parsed.algebra.algebra
        if self.whole:
            fragment.refuse(self.parsed.whole_refusals())
            root = self.tail(query.p).operator
            if query.name == "AskQuery":
                return self.plan(Slice(self.ctx, root, 0, 1), [], ASK)
            return self.plan(root, [self.slot(v) for v in query.PV], SELECT)
        shape = self.partial_shape(query)
        if shape is not None:
            root = self.pattern(shape.pattern, frozenset()).operator
            if shape.order is not None:
                root = TopK(self.ctx, root, [(self.slot(v), desc) for v, desc in shape.order], shape.limit)
            else:
                counted = None if shape.count is None else self.slot(shape.count)
                reduced = [(self.slot(a), self.slot(r), how) for a, r, how in shape.reduced or []]
                root = Tally(self.ctx, root, [self.slot(v) for v in shape.variables], counted, reduced)
            head = query.p.p.PV if query.p.name in ("Distinct", "Slice") else query.p.PV
            return self.plan(root, [self.slot(v) for v in head], SELECT)
        fragment.refuse(self.parsed.refusals)  # once per query shape, by the parser
        node, skip, limit = query.p, 0, None
        if node.name == "Slice":
            skip, limit, node = node.start or 0, node.length, node.p
        if node.name == "Reduced":  # REDUCED allows keeping every duplicate
            node = node.p
        projection: list[Var] = []
        if node.name == "Project":
            projection, node = list(node.PV), node.p
        root = self.pattern(node, frozenset()).operator
        form = SELECT
        if query.name == "AskQuery":
            form, skip, limit, projection = ASK, 0, 1, []
        if skip or limit is not None:
            root = Slice(self.ctx, root, skip, limit)
        return self.plan(root, [self.slot(var) for var in projection], form)

    def partial_shape(self, query: Any) -> fragment.Partial | None:
        """For a query asked for partial answers, their shape (`fragment.partial`), if it has one."""
        if not self.partial or query.name != "SelectQuery" or query.datasetClause:
            return None
        return fragment.partial(query.p)

    def plan(self, root: Operator, slots: list[int], form: pb.QueryForm) -> Plan:
        query = self.parsed.algebra.algebra
        self.ctx.width = len(self.names)
        plan = Plan.compiled(self.ctx, root, self.names, slots, form)
        if not self.whole and _nesting(query.p) > CHECKED_NESTING:
            # protobuf decodes 100 levels: a plan nested deeper would save and never resume
            # (DecodeError: `bounds` makes it query-too-complex, before any result)
            pb.PhysicalPlan.FromString(plan.description)
        return plan

    # -- a query run whole --

    def tail(self, node: Any, first: int | None = None) -> Component:
        """A pattern of a query run whole: the fragment's patterns (`pattern`), and the modifiers
        and groups of any subquery, each evaluated once. `first`: only that many of its first
        rows are read (an ORDER BY keeps them alone)."""
        name = node.name
        if name == "Slice":
            start, limit = node.start or 0, node.length
            inner = self.tail(node.p, None if limit is None else start + limit)
            return replace(inner, operator=Slice(self.ctx, inner.operator, start, limit))
        if name == "Project":
            return self.subquery(node, first)
        if name in ("Reduced", "ToMultiSet"):
            return self.tail(node.p, first)
        if name == "Distinct":
            inner = self.tail(node.p)
            slots = [self.slot(v) for v in node.p.PV]
            tally = Tally(self.ctx, inner.operator, slots, None, exact=True)
            return Component(tally, inner.estimate, inner.variables & set(slots), inner.certain & set(slots))
        if name == "OrderBy":
            return self.order(node, first)
        if name == "AggregateJoin":
            return self.aggregates(node)
        return self.pattern(node, frozenset())

    def subquery(self, node: Any, first: int | None) -> Component:
        """SELECT's projection: the variables it does not project get slots of their own
        while its pattern compiles (a subquery's are not those of the query around it)."""
        projected = set(node.PV)
        outer = self.local
        self.local = dict(outer)
        for var in set(all_variables(node.p)) - projected:
            self.local[var] = Var(f"{var} {len(self.names)} {len(self.local)}")  # a space: no query's name
        try:
            inner = self.tail(node.p, first)
        finally:
            self.local = outer
        slots = {self.slot(v) for v in projected}
        return Component(inner.operator, inner.estimate, inner.variables & slots, inner.certain & slots)

    def order(self, node: Any, first: int | None) -> Component:
        """ORDER BY: its expressions bound to slots of their own, then an exact top-k of
        `first` rows (every row without)."""
        inner = self.tail(node.p)
        operator, keys = inner.operator, []
        for condition in node.expr:
            ordered = isinstance(condition, AlgebraNode) and condition.name == "OrderCondition"
            operator, slot = self.valued(operator, condition.expr if ordered else condition, node.p)
            keys.append((slot, ordered and condition.get("order") == "DESC"))
        top = TopK(self.ctx, operator, keys, EVERY_ROW if first is None else max(first, 1), exact=True)
        return replace(inner, operator=top)

    def aggregates(self, node: Any) -> Component:
        """GROUP BY with COUNT (one), MIN, MAX, SAMPLE of a variable, SUM and AVG of an expression
        (`fragment.whole_refusals`): an exact tally of the group's pattern, an expression's value
        bound to a slot of its own first."""
        inner = self.tail(node.p.p)
        operator = inner.operator
        keys = [self.slot(k) for k in node.p.get("expr") or []]
        count, reduced = None, []
        for aggregate in node.A:
            result = self.slot(aggregate.res)
            if aggregate.name == "Aggregate_Count":
                count = result
                continue
            operator, argument = self.valued(operator, aggregate.vars, node.p.p)
            reduced.append((argument, result, aggregate.name.removeprefix("Aggregate_").lower()))
        tally = Tally(self.ctx, operator, keys, count, reduced, exact=True)
        counted = frozenset() if count is None else frozenset({count})
        results = frozenset(target for _, target, _ in reduced)
        return Component(
            tally, inner.estimate, frozenset(keys) | counted | results, (inner.certain & set(keys)) | counted
        )

    def valued(self, operator: Operator, expr: Any, pattern: Any) -> tuple[Operator, int]:
        """The slot holding `expr`'s value in `operator`'s rows: a variable's own, else a slot of
        its own that a BIND over `operator` fills (its expression over `pattern`'s variables)."""
        from quanta.engine.operators.expression import Extend  # as the expression modules: see `expression`

        if isinstance(expr, Var):
            return operator, self.slot(expr)
        slot = self.slot(BlankTerm(f"value {len(self.names)}"))
        return Extend(self.ctx, operator, slot, self.expression(expr, pattern)[0]), slot

    def hash_join(self, left: Component, right: Component) -> Component:
        """Two inputs each evaluated once, joined: the smaller one read into the table."""
        if right.estimate > left.estimate:
            left, right = right, left
        keys = sorted(left.certain & right.certain)
        return Component(
            HashJoin(self.ctx, left.operator, right.operator, keys),
            min(left.estimate, right.estimate),
            left.variables | right.variables,
            left.certain | right.certain,
        )

    # -- graph patterns --

    def pattern(self, node: Any, bound: frozenset[int]) -> Component:
        """Compile a graph pattern evaluated under bindings of `bound` slots."""
        name = node.name
        if self.whole and name in TAIL:
            return self.tail(node)
        if name in ("BGP", "Join", "Filter"):
            return self.group(node, bound)
        if name == "Union":
            branches = [self.pattern(b, bound) for b in _union_branches(node)]
            certain = frozenset.intersection(*(b.certain for b in branches))
            return Component(
                Union(self.ctx, [b.operator for b in branches]),
                estimate=sum(b.estimate for b in branches),
                variables=frozenset().union(*(b.variables for b in branches)),
                certain=certain,
            )
        if name == "Extend":
            from quanta.engine.operators.expression import Extend  # as the expression modules: see `expression`

            inner = self.pattern(node.p, bound)
            slot = self.slot(node.var)
            expr, _ = self.expression(node.expr, node.p)
            return Component(
                Extend(self.ctx, inner.operator, slot, expr),
                inner.estimate,
                inner.variables | {slot},
                inner.certain,
            )
        if name == "LeftJoin":
            return self.left_join(node, bound)
        if name == "Minus":
            return self.minus(node, bound)
        if name == "PathClosure":
            return self.closure(node)
        if name == "ToMultiSet":  # VALUES, or a subquery
            return self.values(node.p) if node.p.name == "values" else self.pattern(node.p, bound)
        if name == "values":
            return self.values(node)
        raise UnsupportedQuery(fragment.refusal(node) or name)  # fragment.check refused it already

    def left_join(self, node: Any, bound: frozenset[int]) -> Component:
        """OPTIONAL { p2 FILTER(expr) } after p1: the right side compiled as it runs, under the
        bindings of the variables the left side may bind (`LeftJoin`), the condition (which
        sees both sides) filtering its rows."""
        from quanta.engine.operators.expression import Filter  # as the expression modules: see `expression`
        from quanta.sparql import expressions

        left = self.pattern(node.p1, bound)
        right = self.pattern(node.p2, left.certain | (bound & left.variables))
        operator = right.operator
        if node.expr.name != "TrueFilter":
            operator = Filter(self.ctx, operator, expressions.to_proto(node.expr, self.scope(node), self.base))
        return Component(
            LeftJoin(self.ctx, left.operator, operator),
            left.estimate,
            left.variables | right.variables,
            left.certain,
        )

    def minus(self, node: Any, bound: frozenset[int]) -> Component:
        """p1 MINUS { p2 }: p2 runs under the bindings of the variables the two sides share
        (each solution of p2 binds them: `fragment.minus_inside`), on its own otherwise."""
        left = self.pattern(node.p1, bound)
        shared = [self.slot(v) for v in sorted(maybe(node.p1) & maybe(node.p2), key=str)]
        if not shared:
            return left  # no shared variable: MINUS removes nothing
        right = self.pattern(node.p2, frozenset(shared) & left.certain)
        return Component(
            SemiJoin(self.ctx, left.operator, right.operator, "minus", shared),
            left.estimate,
            left.variables,
            left.certain,
        )

    def closure(self, node: Any) -> Component:
        """`s path* o` (or +, ?): one step of the path between two slots of its own, planned
        from either end (`Closure` runs from the end bound when it starts)."""
        # slots of its own (a space is in no label of the query's blank nodes)
        names = (BlankTerm(f"closure {len(self.names)} {n}") for n in itertools.count())
        source, target = next(names), next(names)
        step = expand(source, node.path, target, lambda _: next(names))
        forward = self.pattern(step, frozenset({self.slot(source)}))
        backward = self.pattern(step, frozenset({self.slot(target)}))
        subject, obj = self.end(node.subject), self.end(node.object)
        variables = frozenset(code >> 1 for code in (subject, obj) if code & 1)
        steps = (self.slot(source), self.slot(target))
        operator = Closure(self.ctx, forward.operator, backward.operator, steps, subject, obj, node.mod)
        requires = variables if subject & obj & 1 else frozenset()
        return Component(operator, max(forward.estimate, 1), variables, variables, requires)

    def end(self, term: RdfTerm) -> int:
        """A closure's end as the plan holds it: `slot << 1 | 1`, or a term's `id << 1`."""
        return self.slot(term) << 1 | 1 if isinstance(term, Var | BlankTerm) else self.term(term) << 1

    def exists(self, filtered: Component, condition: Any, pattern: Any) -> Component:
        """FILTER (NOT) EXISTS { p } on the solutions of `pattern`: p runs under their bindings
        (SPARQL's substitution), its expressions seeing them too."""
        visible = frozenset(v for v in in_scope(pattern) if isinstance(v, Var))
        slots = [self.slot(v) for v in sorted(visible, key=str)]
        outer, self.injected = self.injected, self.injected | visible
        try:
            right = self.pattern(condition.graph, frozenset(slots) & filtered.certain)
        finally:
            self.injected = outer
        kind = "not_exists" if condition.name == "Builtin_NOTEXISTS" else "exists"
        return Component(
            SemiJoin(self.ctx, filtered.operator, right.operator, kind, slots),
            filtered.estimate,
            filtered.variables,
            filtered.certain,
        )

    def group(self, node: Any, bound: frozenset[int]) -> Component:
        """A join group: its triple patterns and sub-patterns, and its FILTERs (placed by the
        planner as soon as their variables are bound; a (NOT) EXISTS after the whole join)."""
        parts: list[Any] = []
        filters: list[tuple[pb.Expr, frozenset[int]]] = []
        exists: list[tuple[Any, Any]] = []
        conditions: list[Any] = []
        triples: list[Triple] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if n.name == "Join":
                stack += [n.p2, n.p1]
            elif n.name == "BGP":
                for s, p, o in n.triples:
                    if isinstance(p, PathRepeat):  # anchored (fragment.triple_inside): the planner binds an end first
                        parts.append(AlgebraNode("PathClosure", subject=s, path=p.path, object=o, mod=p.mod))
                    else:
                        triples += self.expand_path((s, p, o))
            elif n.name == "Filter":
                for c in fragment.conjuncts(n.expr):
                    if fragment.exists_conjunct(c):
                        exists.append((c, n.p))
                    elif getattr(c, "name", None) != "TrueFilter":  # FILTER(true) is a bare literal
                        filters.append(self.expression(c, n.p))
                        conditions.append(c)
                stack.append(n.p)
            else:
                parts.append(n)
        component = self.join_group(triples, filters, parts, bound, date_ranges(conditions))
        for condition, pattern in exists:
            component = self.exists(component, condition, pattern)
        return component

    def join_group(
        self,
        triples: list[Triple],
        filters: list[tuple[pb.Expr, frozenset[int]]],
        parts: list[Any],
        bound: frozenset[int],
        ranges: Mapping[Var, ObjectRange],
        start: int = 0,
    ) -> Component:
        """The group's join; an equality of two of its variables (from `filters[start]` on) is
        a join on one of them (`equated`). `ranges`: the strings its FILTERs hold variables
        between (`ranges.date_ranges`). In a query run whole, its subqueries are evaluated
        once each and hash-joined with the rest (`apart`)."""
        if self.whole and any(not fragment.server_evaluates(p) for p in parts):
            return self.apart(triples, filters, parts, bound, ranges)
        equality = self.equality(triples, filters, parts, bound, start)
        if equality is not None:
            return self.equated(triples, filters, parts, bound, *equality, ranges)
        # every part is compiled (its variables get their slots) even when a constant the data lacks empties the group
        components = [self.triple(t, ranges) for t in triples]
        subpatterns = [self.pattern(p, bound) for p in parts]
        if any(c is None for c in components):
            return Component(Values(self.ctx, [], []), 0, frozenset(), frozenset())  # a constant the data lacks
        comps: list[Component] = [c for c in components if c is not None] + subpatterns
        if not comps:
            comps.append(Component(Values(self.ctx, [], [()]), 1, frozenset(), frozenset()))
        return plan_join(self.ctx, comps, filters, bound)

    def apart(
        self,
        triples: list[Triple],
        filters: list[tuple[pb.Expr, frozenset[int]]],
        parts: list[Any],
        bound: frozenset[int],
        ranges: Mapping[Var, ObjectRange],
    ) -> Component:
        """A group of a query run whole with subqueries (or groups): its patterns joined as
        `join_group` joins them, with the FILTERs over their variables alone, then hash-joined
        with each subquery, then the other FILTERs. When a subquery has fewer rows than the
        patterns (estimated) and shares a variable with them, it drives instead: the patterns
        run under each of its rows (an index join), and no table holds them (BSBM's
        business-intelligence query 2: a product's few thousand feature matches, rather than
        every product read into a table)."""
        inside = [p for p in parts if fragment.server_evaluates(p)]
        own = {self.slot(t) for triple in triples for t in triple if isinstance(t, Var | BlankTerm)}
        own |= {self.slot(v) for p in inside for v in in_scope(p)}
        early = [f for f in filters if f[1] <= own] if triples or inside else []
        components = [self.tail(p) for p in parts if p not in inside]
        if triples or inside:
            group = self.join_group(triples, early, inside, bound, ranges)
            driving = min(components, key=lambda c: c.estimate)
            if driving.estimate < group.estimate and driving.certain & own:
                under = self.join_group(triples, early, inside, bound | driving.certain, ranges)
                components.remove(driving)
                group = Component(
                    IndexJoin(self.ctx, driving.operator, under.operator),
                    min(driving.estimate, group.estimate),
                    driving.variables | under.variables,
                    driving.certain | under.certain,
                )
            components.insert(0, group)
        joined = components[0]
        for component in components[1:]:
            joined = self.hash_join(joined, component)
        from quanta.engine.operators.expression import Filter  # as the expression modules: see `expression`

        operator = joined.operator
        for expr, _ in (f for f in filters if f not in early):
            operator = Filter(self.ctx, operator, expr)
        return replace(joined, operator=operator)

    def equality(
        self,
        triples: list[Triple],
        filters: list[tuple[pb.Expr, frozenset[int]]],
        parts: list[Any],
        bound: frozenset[int],
        start: int,
    ) -> tuple[int, int, int] | None:
        """The first FILTER(?a = ?b) or FILTER(sameTerm(?a, ?b)) from `start` on whose two
        variables the group's triple patterns bind and nothing else does (no sub-pattern, no
        outer binding): its position, and the slots of ?a and ?b."""
        in_triples = {self.slot(t) for triple in triples for t in triple if isinstance(t, Var | BlankTerm)}
        elsewhere = set(bound) | {self.slot(v) for p in parts for v in in_scope(p)}
        for index in range(start, len(filters)):
            call = filters[index][0].call
            if call.function not in (pb.FUNCTION_EQ, pb.FUNCTION_SAME_TERM) or len(call.args) != 2:
                continue
            if not all(arg.WhichOneof("kind") == "variable" for arg in call.args):
                continue
            a, b = (arg.variable for arg in call.args)
            if a != b and {a, b} <= in_triples and not {a, b} & elsewhere:
                return index, a, b
        return None

    def equated(
        self,
        triples: list[Triple],
        filters: list[tuple[pb.Expr, frozenset[int]]],
        parts: list[Any],
        bound: frozenset[int],
        index: int,
        a: int,
        b: int,
        ranges: Mapping[Var, ObjectRange],
    ) -> Component:
        """A join on ?a instead of a product of the patterns filtered by ?a = ?b (BSBM's business
        intelligence query 2). Where ?a is an IRI or a blank node, ?a = ?b holds exactly when ?b
        is the same term: the patterns with ?b written ?a, then ?b bound to ?a's value. sameTerm
        needs no more; for `=`, two different literals may still be equal in value (1 and 1.0), so
        the group as it was, with both variables held to literals, is the other branch of a UNION."""
        from quanta.engine.operators.expression import Extend  # as the expression modules: see `expression`
        from quanta.sparql import expressions

        def as_a(slot: int) -> int:
            return a if slot == b else slot

        # the terms as the triples write them (a subquery's own variables have other names as slot keys)
        var_a, var_b = (
            next(t for triple in triples for t in triple if isinstance(t, Var | BlankTerm) and self.slot(t) == slot)
            for slot in (a, b)
        )
        same_term = filters[index][0].call.function == pb.FUNCTION_SAME_TERM
        rest = [(expressions.renumber(e, slot_map=as_a), frozenset(map(as_a, needs))) for e, needs in filters]
        if same_term:
            del rest[index]
        else:
            rest[index] = (_call(pb.FUNCTION_NOT, _call(pb.FUNCTION_IS_LITERAL, pb.Expr(variable=a))), frozenset({a}))
        renamed = [_renamed_triple(triple, var_b, var_a) for triple in triples]
        joined = self.join_group(renamed, rest, parts, bound, ranges, index)  # the equality gone, or its guard there
        same = Component(
            Extend(self.ctx, joined.operator, b, pb.Expr(variable=a)),
            joined.estimate,
            joined.variables | {b},
            joined.certain | {b},
        )
        if same_term:
            return same
        literals = [(_call(pb.FUNCTION_IS_LITERAL, pb.Expr(variable=s)), frozenset({s})) for s in (a, b)]
        other = self.join_group(triples, filters + literals, parts, bound, ranges, index + 1)
        return Component(
            Union(self.ctx, [same.operator, other.operator]),
            # equal literals that are different terms are rare: the other branch is a product, but
            # its FILTERs keep few of its rows (estimates leave FILTERs out)
            same.estimate + min(other.estimate, same.estimate),
            same.variables | other.variables,
            same.certain & other.certain,
        )

    def expand_path(self, triple: Triple) -> list[Triple]:
        """Sequence (p/q) and inverse (^p) paths are chains of triple
        patterns (the other paths are the client's)."""
        s, path, o = triple
        if isinstance(path, PathInverse):
            return self.expand_path((o, path.arg, s))
        if isinstance(path, PathSequence):
            out = []
            for step in path.args[:-1]:
                link = BlankTerm(f"path{len(self.names)}")
                self.slot(link)
                out += self.expand_path((s, step, link))
                s = link
            return out + self.expand_path((s, path.args[-1], o))
        return [triple]

    def triple(self, triple: Triple, ranges: Mapping[Var, ObjectRange]) -> Component | None:
        """A scan, or None when a constant is not in the data (no match). Its object's values
        are read as a range of the object index when a FILTER bounds them (`ranges`) and the
        range holds fewer of its triples than the whole pattern (and spans at most RANGE_OBJECTS
        objects, lib/native/src/store.rs)."""
        codes = []
        constants = []
        for term in triple:
            if isinstance(term, Var | BlankTerm):
                codes.append(self.slot(term) << 1 | 1)
                constants.append(0)
            else:
                assert isinstance(term, RdfTerm)  # paths were expanded, or refused by fragment.check
                gid = self.term(term)
                if gid <= 0:
                    return None
                codes.append(gid << 1)
                constants.append(gid)
        s, p, o = constants
        estimate, objects = self.store.estimate(s, p, o), None
        subject, _, object_ = triple
        if (
            isinstance(object_, Var)
            and object_ in ranges
            and isinstance(subject, Var | BlankTerm)
            and subject != object_
        ):
            start, end = self.store.object_string_range(*ranges[object_])
            count = self.store.object_range_count(start, end, p)
            if count is not None and count < estimate:
                estimate, objects = count, (start, end)
        scan = Scan(self.ctx, (codes[0], codes[1], codes[2]), objects)
        variables = frozenset(scan.variables())
        return Component(scan, estimate, variables, variables)

    def values(self, node: Any) -> Component:
        variables: list[Var] = []
        for row in node.res:
            variables += [v for v in row if v not in variables]
        slots = [self.slot(v) for v in variables]
        rows = [
            tuple(0 if row.get(v, "UNDEF") == "UNDEF" else self.term(row[v]) for v in variables) for row in node.res
        ]
        certain = frozenset(s for i, s in enumerate(slots) if all(r[i] for r in rows))
        return Component(Values(self.ctx, slots, rows), len(rows), frozenset(slots), certain)

    def expression(self, expr: Any, pattern: Any) -> tuple[pb.Expr, frozenset[int]]:
        """A FILTER's condition or a BIND's expression (over the variables of `pattern`) as the
        plan holds it, and the slots it reads. The expression modules (and protobuf) are
        imported only by a query with expressions (`quanta.engine.operators`)."""
        from quanta.sparql import expressions

        compiled = expressions.to_proto(expr, self.scope(pattern), self.base)
        return compiled, frozenset(expressions.variables(compiled))

    def scope(self, node: Any) -> ExpressionScope:
        return ExpressionScope(self, frozenset(v for v in in_scope(node) if isinstance(v, Var)) | self.injected)


@dataclass(frozen=True)
class ExpressionScope:
    """Variables an expression sees: those of its group; others are unbound."""

    compiler: Compiler
    visible: frozenset[Var]

    def slot(self, var: Var) -> int | None:
        return self.compiler.slot(var) if var in self.visible else None

    def term(self, node: RdfTerm) -> int:
        return self.compiler.term(node)


def in_scope(node: Any) -> set[RdfTerm]:
    """Variables a graph pattern may bind (its expressions see only these)."""
    name = node.name
    if name == "BGP":
        return {t for triple in node.triples for t in triple if isinstance(t, Var | BlankTerm)}
    if name == "PathClosure":
        return {t for t in (node.subject, node.object) if isinstance(t, Var | BlankTerm)}
    if name in ("Join", "Union", "LeftJoin", "Minus"):
        return in_scope(node.p1) | (set() if name == "Minus" else in_scope(node.p2))
    if name == "Extend":
        return in_scope(node.p) | {node.var}
    if name == "ToMultiSet":
        return in_scope(node.p)
    if name == "values":
        return {var for row in node.res for var in row}
    if name == "Project":  # a subquery (of a query run whole)
        return set(node.PV)
    if name == "AggregateJoin":
        return set(node.p.get("expr") or []) | {aggregate.res for aggregate in node.A}
    if "p" in node:
        return in_scope(node.p)
    return set()


# Algebra nested this deep (patterns and expressions) or less always fits a saved plan's 100 levels
CHECKED_NESTING = 24


def _nesting(node: Any) -> int:
    """How deep patterns and expressions nest in an algebra tree."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):  # AlgebraNode
            deepest = max(deepest, depth)
            # terms (str) are leaves: not pushed, the walk visits only what may hold nodes
            stack.extend((v, depth + 1) for k, v in value.items() if not isinstance(v, str) and k[0] != "_")
        elif isinstance(value, list | tuple):
            stack.extend((v, depth) for v in value if not isinstance(v, str))
    return deepest


def _call(function: pb.Function, *args: pb.Expr) -> pb.Expr:
    return pb.Expr(call=pb.Call(function=function, args=args))


def _renamed_triple(triple: Triple, old: RdfTerm, new: RdfTerm) -> Triple:
    s, p, o = triple
    return (new if s == old else s, new if p == old else p, new if o == old else o)


def _union_branches(node: Any) -> list[Any]:
    if node.name != "Union":
        return [node]
    return _union_branches(node.p1) + _union_branches(node.p2)


__all__ = ["Compiler", "compile_query"]
