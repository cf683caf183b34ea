"""Property paths as algebra (SPARQL 1.1 section 18.2.2.4), for the smart client and the
workers' closures alike:

- `p` and sequences and inverses of such: triples (a worker expands `p/q` and
  `^p` itself);
- `(a|b)`: a UNION of the alternatives;
- `!(p|^q)`: a triple with a fresh predicate variable, FILTERed by NOT IN
  (and its inverse, in a UNION when both directions are negated);
- `p*`, `p+`, `p?`: PathClosure(subject, path, object, mod): a worker's
  `Closure` when the server fragment has it (`fragment.triple_inside`), else
  the smart client's breadth-first expansion (quanta.client.ops.paths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quanta.sparql.syntax import (
    AlgebraNode,
    IriTerm,
    PathAlternative,
    PathInverse,
    PathNegated,
    PathRepeat,
    PathSequence,
    PropertyPath,
    RdfTerm,
)

Fresh = Callable[[str], Any]  # a new variable (a hint for its name): a sequence's links, a negation's predicate


def chain(path: Any) -> bool:
    """A term, or a sequence/inverse chain of terms (a worker expands it into triple patterns)."""
    if isinstance(path, PathInverse):
        return chain(path.arg)
    if isinstance(path, PathSequence):
        return all(chain(step) for step in path.args)
    return not isinstance(path, PropertyPath)


def expand(s: RdfTerm, path: Any, o: RdfTerm, fresh: Fresh) -> Any:
    """`s path o` as algebra."""
    if chain(path):
        return AlgebraNode("BGP", triples=[(s, path, o)])
    if isinstance(path, PathInverse):
        return expand(o, path.arg, s, fresh)
    if isinstance(path, PathSequence):
        parts = []
        for step in path.args[:-1]:
            link = fresh("path")
            parts.append(expand(s, step, link, fresh))
            s = link
        parts.append(expand(s, path.args[-1], o, fresh))
        return join_all(parts)
    if isinstance(path, PathAlternative):
        branches = [expand(s, alternative, o, fresh) for alternative in path.args]
        node = branches[0]
        for branch in branches[1:]:
            node = AlgebraNode("Union", p1=node, p2=branch)
        return node
    if isinstance(path, PathNegated):
        forward = [a for a in path.args if isinstance(a, IriTerm)]
        backward = [a.arg for a in path.args if isinstance(a, PathInverse)]
        sides = []
        if forward:
            sides.append(_negated(s, forward, o, fresh))
        if backward:
            sides.append(_negated(o, backward, s, fresh))
        return sides[0] if len(sides) == 1 else AlgebraNode("Union", p1=sides[0], p2=sides[1])
    if isinstance(path, PathRepeat):
        return AlgebraNode("PathClosure", subject=s, path=path.path, object=o, mod=path.mod)
    raise ValueError(f"unknown property path {path!r}")


def _negated(s: RdfTerm, excluded: list[Any], o: RdfTerm, fresh: Fresh) -> Any:
    predicate = fresh("np")
    test = AlgebraNode("RelationalExpression", expr=predicate, op="NOT IN", other=list(excluded))
    return AlgebraNode("Filter", expr=test, p=AlgebraNode("BGP", triples=[(s, predicate, o)]))


def join_all(parts: list[Any]) -> Any:
    """The parts joined left-deep (no part: the empty group)."""
    if not parts:
        return AlgebraNode("BGP", triples=[])
    node = parts[0]
    for part in parts[1:]:
        node = AlgebraNode("Join", p1=node, p2=part)
    return node
