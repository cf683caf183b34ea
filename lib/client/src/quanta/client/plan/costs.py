"""Where an operator runs when both the workers and the client can run it, from the dataset
file's exact counts (*To Ship or Not to (Function) Ship*: ship the function when it shrinks
what moves, the data otherwise).

One choice is made here today: a GROUP BY whose DISTINCT aggregate sits beside others
(COUNT(*) and COUNT(DISTINCT ?u)). The workers' tally then keeps each distinct row of the keys
and the aggregates' arguments with its count, which reduces the transfer only as far as those
rows repeat: by a factor of thousands when ?u is a user with many friendships, by none when it
is an entity per solution (a review), where the tally was measured 1.4 to 2 times slower than
shipping the rows. The estimate, for a star of triple patterns around one subject variable
with constant predicates (exact HDT counts: a predicate's triples, and its distinct subjects from
the predicate index): the solutions, as a join of independent patterns, are the fewest
subjects any predicate has times each predicate's triples per subject; the tally's rows, at
most those subjects times, for each variable that is an object, its predicate's triples per
subject (1 for a predicate each subject has once, such as a gender). Any other pattern, a
tally without the star's subject, or a client without the file (over HTTP): the rows go to the
client, as they did before this model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quanta.client.transport import Cardinalities
from quanta.sparql.syntax import AlgebraNode, IriTerm, Var
from quanta.sparql.terms import from_term

# The tally is chosen when its rows are at most this share of the solutions (a tally row
# costs about twice a shipped row: its count, and the table on the worker).
REDUCTION = 2


@dataclass(frozen=True)
class Tally:
    """A tally's estimate: at least `solutions` solutions, into at most `rows` rows."""

    solutions: int
    rows: int

    @property
    def reduces(self) -> bool:
        return self.rows * REDUCTION <= self.solutions

    def __str__(self) -> str:
        return f"tally of >= {self.solutions:,} solutions into <= {self.rows:,} rows"


def tally(pattern: Any, variables: list[Var], counts: Cardinalities | None) -> Tally | None:
    """The estimate for a tally of `pattern`'s solutions by `variables`; None when the file's
    counts do not bound it (see the module's docstring)."""
    triples = _star(pattern)
    if counts is None or not triples or triples[0][0] not in variables:
        return None
    center = triples[0][0]
    fanout: dict[Any, float] = {}  # an object variable's values per subject
    subjects: list[int] = []
    solutions = 1.0
    for _, p, o in triples:
        gid = counts.locate(from_term(p))
        distinct = counts.distinct_subjects(gid) if gid else 0
        if distinct == 0:
            return None  # a predicate the data lacks: nothing to choose
        per_subject = counts.estimate(0, gid, 0) / distinct
        subjects.append(distinct)
        solutions *= per_subject
        if isinstance(o, Var):
            fanout[o] = min(fanout.get(o, per_subject), per_subject)
    solutions *= min(subjects)
    rows = float(min(subjects))
    for var in variables:
        if var != center:
            if var not in fanout:
                return None
            rows *= fanout[var]
    return Tally(int(solutions), int(min(rows, solutions)))


def _star(pattern: Any) -> list[tuple[Any, Any, Any]]:
    """The triple patterns of a BGP (under FILTERs) that share one subject variable and have
    constant predicates; empty for any other pattern."""
    while isinstance(pattern, AlgebraNode) and pattern.name == "Filter":
        pattern = pattern.p
    if not isinstance(pattern, AlgebraNode) or pattern.name != "BGP" or not pattern.triples:
        return []
    triples = list(pattern.triples)
    center = triples[0][0]
    if not isinstance(center, Var) or not all(
        s == center and isinstance(p, IriTerm) and o != center for s, p, o in triples
    ):
        return []
    return triples
