"""Join ordering and join algorithms for one group (optimize, then execute).

Greedy and left-deep, from HDT cardinality estimates: start from the most
selective component (of those sharing a variable the group runs under, if
any), then repeatedly add the cheapest component that shares a variable with
what is already bound. Another start is taken when the order it leads to is
estimated to cost less than a quarter as much (`_order_cost`: rows per step from
each pattern's count over its predicate's distinct subjects or objects). Each step is an index loop join,
or a merge join when the left input and the next pattern are both sorted on
the same subject variable and reading the pattern whole costs less than one
index lookup per left mapping (in a group that runs once: not in an EXISTS's or
an OPTIONAL's pattern, which runs under each outer mapping). FILTERs go right after the step that binds
their last variable.
"""

from __future__ import annotations

from dataclasses import dataclass

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators import IndexJoin, MergeJoin, Operator, Scan
from quanta.engine.storage import TripleStore
from quanta.sparql.errors import UnsupportedQuery

# Measured on pyHDT (docs/benchmarks.md): one index lookup costs about 16
# times as much as reading one more entry of an open scan.
LOOKUP_OVER_SCAN = 16
# The most selective start is kept unless another's order is estimated this many times cheaper,
# and the start's own order at least START_WORTH_CHANGING lookups and rows: the estimates are rough
# (independent joins), the most selective start is right most often, and in a small query another
# saves little.
BETTER_START = 4
START_WORTH_CHANGING = 10_000
# Objects sampled to estimate how many distinct ones a predicate has.
OBJECT_SAMPLES = 16


@dataclass(frozen=True)
class Component:
    """An operator with what the planner needs to know about it."""

    operator: Operator
    estimate: int
    variables: frozenset[int]  # slots it may bind
    certain: frozenset[int]  # slots it binds in every mapping
    requires: frozenset[int] = frozenset()  # one of these bound before it runs (a closure's variable ends)


def plan_join(
    ctx: Context,
    components: list[Component],
    filters: list[tuple[pb.Expr, frozenset[int]]],
    bound: frozenset[int],
) -> Component:
    remaining = list(components)
    pending = list(filters)
    first = _start(ctx.store, remaining, bound)
    remaining.remove(first)
    op, estimate = first.operator, first.estimate
    variables, own = first.variables, first.certain
    certain = own | bound
    op, pending = _attach_filters(ctx, op, pending, certain)
    while remaining:
        nxt = min(_connected(_ready(remaining, certain), certain), key=lambda c: _cost(c, certain))
        remaining.remove(nxt)
        op = _join(ctx, op, estimate, nxt, certain, merge=not bound)
        estimate = min(estimate, nxt.estimate) if nxt.variables & certain else estimate * max(nxt.estimate, 1)
        variables |= nxt.variables
        own |= nxt.certain
        certain = own | bound
        op, pending = _attach_filters(ctx, op, pending, certain)
    for expr, _ in pending:  # variables that may stay unbound: filter at the end
        op = _filter(ctx, op, expr)
    return Component(op, estimate, variables, own)


def _start(store: TripleStore, components: list[Component], bound: frozenset[int]) -> Component:
    """The most selective component; or, in a group of triple patterns whose order from it is
    large, one whose order costs BETTER_START times less (BSBM's BI Q1 at 100k products: the
    2,011 product types lead to every product, the 2,687 reviewers in a country to a twentieth
    of the reviews)."""
    candidates = sorted(_connected(_ready(components, bound), bound), key=lambda c: _cost(c, bound))
    first = candidates[0]
    if len(components) < 3 or not all(_estimable(c) for c in components):
        return first
    cost = _order_cost(store, first, components, bound)
    if cost < START_WORTH_CHANGING:
        return first
    # an order costs at least its start's rows: most starts need no estimate of their order
    bar = cost / BETTER_START
    best = first
    for c in candidates[1:]:
        if c.estimate >= bar:
            continue
        cost = _order_cost(store, c, components, bound)
        if cost < bar:
            best, bar = c, cost
    return best


def _order_cost(store: TripleStore, first: Component, components: list[Component], bound: frozenset[int]) -> float:
    """Estimated lookups and rows of the greedy order from `first` (the choice `plan_join` makes
    at each step, written out: this runs for every start considered): each step looks up once
    per mapping so far, and multiplies the mappings by what `_rows_per_mapping` estimates."""
    remaining = [c for c in components if c is not first]
    rows = cost = float(first.estimate)
    certain = first.certain | bound
    while remaining:
        nxt, best = None, (True, 1, 0)
        for c in remaining:
            if c.requires and not c.requires & certain:
                continue  # a closure with no end bound yet
            key = (not c.variables & certain, 0 if c.variables <= certain else 1, c.estimate)
            if nxt is None or key < best:
                nxt, best = c, key
        if nxt is None:
            return float("inf")
        remaining.remove(nxt)
        cost += rows
        rows *= _rows_per_mapping(store, nxt, certain)
        certain |= nxt.certain
    return cost + rows


def _estimable(c: Component) -> bool:
    """A triple pattern of a constant predicate: what `_rows_per_mapping` can estimate (for a
    UNION or a subquery under a bound variable, its count would stand for its rows per mapping:
    BSBM's BI Q6 then started from its union of four ratings, 3.7 ms to 2.8 s)."""
    return isinstance(c.operator, Scan) and not c.operator.pattern[1] & 1


def _rows_per_mapping(store: TripleStore, c: Component, bound: frozenset[int]) -> float:
    """Rows an `_estimable` pattern gives per mapping binding `bound`: its count over its
    predicate's distinct values at each position bound (a fraction for a check); its count
    when it shares no variable with them."""
    operator = c.operator
    assert isinstance(operator, Scan)
    if not c.variables & bound:
        return float(max(c.estimate, 1))
    s, p, o = operator.pattern
    rows = float(c.estimate)
    if s & 1 and s >> 1 in bound:
        rows /= max(store.distinct_subjects(p >> 1), 1)
    if o & 1 and o >> 1 in bound and o != s:
        rows /= max(distinct_objects(store, p >> 1), 1)
    return rows


def distinct_objects(store: TripleStore, p: int) -> float:
    """How many distinct objects predicate `p` has, estimated from OBJECT_SAMPLES of its triples
    evenly spread: a triple's object is drawn as often as it is used, so the mean of 1/count
    over the draws, times the triples, estimates the distinct objects (exact when all are used
    alike). Constant-time reads, once per predicate and file build."""
    key = (store.version, p)
    found = _DISTINCT_OBJECTS.get(key)
    if found is None:
        if len(_DISTINCT_OBJECTS) >= 1 << 16:
            _DISTINCT_OBJECTS.clear()
        total = store.estimate(0, p, 0)
        offsets = [i * total // OBJECT_SAMPLES for i in range(OBJECT_SAMPLES)] if total else []
        draws = [next(store.search(0, p, 0, offset))[2] for offset in offsets]
        inverse = sum(1 / max(store.estimate(0, p, o), 1) for o in draws)
        found = _DISTINCT_OBJECTS[key] = total * inverse / OBJECT_SAMPLES
    return found


_DISTINCT_OBJECTS: dict[tuple[int, int], float] = {}  # by (file build, predicate)


def _connected(components: list[Component], bound: frozenset[int]) -> list[Component]:
    """Those sharing a bound variable (lookups under its value; the first of a group that runs
    under an outer join's bindings too: an OPTIONAL's or an EXISTS's), else all."""
    return [c for c in components if c.variables & bound] or components


def _ready(components: list[Component], bound: frozenset[int]) -> list[Component]:
    """Those that may run now (a closure once one of its variable ends is bound: the fragment
    admits only closures some pattern of their group anchors, `fragment.triple_inside`)."""
    ready = [c for c in components if not c.requires or c.requires & bound]
    if not ready:
        raise UnsupportedQuery("property path", "no end of the closure is bound")
    return ready


def _cost(c: Component, bound: frozenset[int]) -> tuple[int, int]:
    """Fully bound patterns are membership checks: take them first."""
    return (0 if c.variables <= bound else 1, c.estimate)


def _attach_filters(
    ctx: Context, op: Operator, pending: list[tuple[pb.Expr, frozenset[int]]], certain: frozenset[int]
) -> tuple[Operator, list[tuple[pb.Expr, frozenset[int]]]]:
    rest = []
    for expr, needs in pending:
        if needs <= certain:
            op = _filter(ctx, op, expr)
        else:
            rest.append((expr, needs))
    return op, rest


def _filter(ctx: Context, op: Operator, condition: pb.Expr) -> Operator:
    """FILTER's module is imported only by a query with one (`quanta.engine.operators`)."""
    from quanta.engine.operators.expression import Filter

    return Filter(ctx, op, condition)


def _join(
    ctx: Context, left: Operator, estimate: int, right: Component, bound: frozenset[int], merge: bool
) -> Operator:
    """An index loop join, or a merge join (`merge`: the group runs once, not under each mapping
    of an outer join, which would read the merge join's right side whole each time: an EXISTS's
    or an OPTIONAL's pattern)."""
    scan = right.operator
    if merge and isinstance(scan, Scan):
        key = left.sorted_on()
        s, p, o = scan.pattern
        if (
            key is not None
            and s == key << 1 | 1
            and not p & 1
            and not (right.variables - {key}) & bound
            and o != s
            and ctx.store.sorted_by_subject(0, p >> 1, 0 if o & 1 else o >> 1)
            # the right scan resumes at its group's offset: it must jump there
            and ctx.store.constant_skip(0, p >> 1, 0 if o & 1 else o >> 1)
            and right.estimate < LOOKUP_OVER_SCAN * estimate
        ):
            return MergeJoin(ctx, left, scan, key)
    return IndexJoin(ctx, left, right.operator)
