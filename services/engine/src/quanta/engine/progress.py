"""How far a suspended plan has come: an estimated fraction done, 0..1.

Computed once per quantum, when the plan suspends (after its state is saved, so a
native plan's state is exact), from the state alone: the scans' offsets, the
mappings the joins are running for, and HDT's exact count of a pattern's triples
(`TripleStore.estimate`, a lookup in the indexes: no scan). A completed plan is 1.0.

The model is nested-loop progress, as in SaGe's plans. A left-deep chain
scan1 ⋈ scan2 ⋈ ... is a loop over scan1's entries, each running the rest of
the chain under its mapping, so

    fraction = (o1 - 1 + f_rest) / c1   while the rest runs for scan1's entry o1 - 1
             = o1 / c1                  between two entries

where o1 is scan1's offset (entries read), c1 its pattern's count, and f_rest the
same fraction one level in: the inner scan's offset over the count of its pattern
under the current mapping of that join. A merge join is driven by its left input:
its right side's current group counts as the rest (the group's position over the
group's size, the right pattern's count with the key bound). Every level is
clamped to 0..1.

- UNION: branches run in order; each weighs what it would read first (its driving
  scan's count under the input mapping, a VALUES's rows), so
  (done branches' weight + the running branch's weight * its fraction) / all weights.
- VALUES: rows read over rows.
- LIMIT/OFFSET: the larger of the input's fraction and (rows skipped + rows emitted)
  over (OFFSET + LIMIT), when there is a LIMIT.
- FILTER, BIND: their input's fraction.

Limits: the fraction counts outer entries, not work. An entry whose inner runs are
long (a skewed join: a few subjects with most of the matches) weighs as much as one
whose runs are empty, so the fraction is exact for one scan and only as linear in time
as the join's fan-out is even; filters that drop most rows do not change it. A UNION
branch's weight is its first scan, not its joins. It is non-decreasing from quantum
to quantum, and 1.0 exactly at the end.
"""

from __future__ import annotations

from quanta.engine.operators import Extend, Filter, IndexJoin, MergeJoin, Operator, Scan, Slice, Union, Values
from quanta.engine.operators.native import NativeTree
from quanta.engine.plan import Plan
from quanta.engine.storage import TripleStore
from quanta.sparql.term_table import Mapping


def estimate(plan: Plan) -> float:
    """The estimated fraction of `plan` done, 0..1, from its current (suspended) state."""
    return _clamp(fraction(plan.root, (0,) * plan.ctx.width, None))


def fraction(op: Operator, mu: Mapping, inner: float | None) -> float:
    """How much of `op`'s run under `mu` is done. `inner`: how far the consumer has got with
    the last mapping `op` handed it (None: the consumer holds none; what was handed is done)."""
    if isinstance(op, NativeTree):
        return _native(op, mu, inner)
    if isinstance(op, Scan):
        return _scan(op.ctx.store, op, mu, op.offset, inner)
    if isinstance(op, IndexJoin):
        if op.current is None:
            return fraction(op.left, mu, None)
        return fraction(op.left, mu, fraction(op.right, op.current, inner))
    if isinstance(op, MergeJoin):
        if op.current is None:
            return fraction(op.left, mu, None)
        group = _group(op.ctx.store, op.right, op.key, op.current, op.group_position, inner)
        return fraction(op.left, mu, group)
    if isinstance(op, Filter | Extend):
        return fraction(op.input, mu, inner)
    if isinstance(op, Union):
        return _union(op, mu, inner)
    if isinstance(op, Values):
        return _position(op.position, len(op.rows), inner)
    if isinstance(op, Slice):
        structural = fraction(op.input, mu, inner)
        if op.limit is None:
            return structural
        total = op.offset + op.limit
        if total == 0:
            return 1.0
        pulled = (op.offset - op.skip) + (op.limit - (op.remaining or 0))
        return max(structural, _clamp(pulled / total))
    return 0.0  # an operator this model does not know: nothing claimed


def weight(op: Operator, mu: Mapping) -> int:
    """What `op` reads first under `mu`: its driving scan's count (a UNION's: its branches'),
    a VALUES's rows. A UNION's branches weigh this much each."""
    if isinstance(op, NativeTree):
        return weight(op.inner, mu)
    if isinstance(op, Scan):
        return op.ctx.store.estimate(*op.resolve(mu)[0])
    if isinstance(op, IndexJoin | MergeJoin):
        return weight(op.left, mu)
    if isinstance(op, Filter | Extend | Slice):
        return weight(op.input, mu)
    if isinstance(op, Union):
        return sum(weight(b, mu) for b in op.branches)
    if isinstance(op, Values):
        return len(op.rows)
    return 1


def _clamp(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


def _position(position: int, count: int, inner: float | None) -> float:
    """`position` items read of `count`, the last one `inner` done (None: wholly)."""
    if count <= 0:
        return 1.0  # nothing to read: done
    done = position - 1 + _clamp(inner) if inner is not None and position > 0 else position
    return _clamp(done / count)


def _scan(store: TripleStore, scan: Scan, mu: Mapping, offset: int, inner: float | None) -> float:
    return _position(offset, store.estimate(*scan.resolve(mu)[0]), inner)


def _group(store: TripleStore, right: Scan, key: int, current: Mapping, position: int, inner: float | None) -> float:
    """A merge join's progress in the right group of its current left mapping: the rows of the
    group joined so far over the group's size (the right pattern with only the key bound)."""
    keyed = [0] * len(current)
    keyed[key] = current[key]
    return _position(position, store.estimate(*right.resolve(tuple(keyed))[0]), inner)


def _union(op: Union, mu: Mapping, inner: float | None) -> float:
    n = len(op.branches)
    if op.active >= n:
        return 1.0
    weights = [max(weight(b, mu), 0) for b in op.branches]
    total = sum(weights)
    running = fraction(op.branches[op.active], mu, inner)
    if total == 0:  # nothing to weigh by: branches count alike
        return _clamp((op.active + running) / n)
    return _clamp((sum(weights[: op.active]) + weights[op.active] * running) / total)


def _native(tree: NativeTree, mu: Mapping, inner: float | None) -> float:
    """A native plan's state lives in Rust: copied into its Python operators' attributes
    (`NativeTree.to_python`), it is read by the same formulas as theirs."""
    tree.to_python()
    return fraction(tree.inner, mu, inner)
