"""Join ordering and join algorithms for one group (optimize, then execute).

Greedy and left-deep, from HDT cardinality estimates: start from the most
selective component (of those sharing a variable the group runs under, if
any), then repeatedly add the cheapest component that shares a variable with
what is already bound. Each step is an index loop join,
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
from quanta.sparql.errors import UnsupportedQuery

# Measured on pyHDT (docs/benchmarks.md): one index lookup costs about 16
# times as much as reading one more entry of an open scan.
LOOKUP_OVER_SCAN = 16


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
    first = min(_connected(_ready(remaining, bound), bound), key=lambda c: _cost(c, bound))
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
