"""How far a suspended plan has come: an estimated fraction done, 0..1.

Computed once per quantum, when the plan suspends, by the native core from the
plan's state alone: the scans' offsets, the
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

from quanta.engine.plan import Plan


def estimate(plan: Plan) -> float:
    """The estimated fraction of `plan` done, 0..1, from its current (suspended) state:
    computed natively from the native state (`Node::fraction` in lib/native/src/exec.rs)."""
    return plan.root.progress()
