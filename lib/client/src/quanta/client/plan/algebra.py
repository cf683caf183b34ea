"""Helpers over the query's algebra (`quanta.sparql.syntax`): copying with changes, variables, and the
planner's first pass (blank nodes of patterns to hidden variables, property
paths to algebra).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from quanta.client.plan.paths import expand_bgp
from quanta.sparql import fragment
from quanta.sparql.syntax import AlgebraNode, BlankTerm, PropertyPath, RdfTerm, Var
from quanta.sparql.variables import all_variables, maybe

Rewrite = Callable[[Any], Any]  # a node's replacement, or None to copy it with its children rewritten


def copy_node(node: AlgebraNode, **changes: Any) -> AlgebraNode:
    """A copy of a node with some members changed (or added)."""
    return AlgebraNode(node.name, **{**node, **changes})


def rewrite(value: Any, change: Rewrite) -> Any:
    """The tree with `change` applied top-down (`change` returns None to go on below)."""
    replaced = change(value)
    if replaced is not None:
        return replaced
    if isinstance(value, AlgebraNode):
        return copy_node(value, **{k: rewrite(v, change) for k, v in value.items() if not k.startswith("_")})
    if isinstance(value, list):
        return [rewrite(v, change) for v in value]
    if isinstance(value, tuple):
        return tuple(rewrite(v, change) for v in value)
    if isinstance(value, dict):  # a VALUES row: variables to terms
        return {rewrite(k, change): rewrite(v, change) for k, v in value.items()}
    return value


def member(node: AlgebraNode, name: str) -> Any:
    """A member, None when absent."""
    return node.get(name)


class Prepass:
    """Blank nodes of patterns become hidden variables (one per label), the variables a
    subquery does not project become fresh variables of their own (SPARQL's scoping: they
    are not the outer query's variables of the same name), and the paths the server does
    not evaluate become algebra; then counts the uses of each variable (`uses`), for the
    planner to leave out of a piece the variables used nowhere else (`Planner.projection`)."""

    def __init__(self, fresh: Callable[[str], Var]) -> None:
        self.fresh = fresh
        self.blanks: dict[BlankTerm, Var] = {}
        self.hidden: set[Var] = set()
        self.uses: Counter[Var] = Counter()
        # a COUNT(DISTINCT *) tells solutions apart by all their variables: a piece leaves none out
        self.counts_all = False

    def run(self, algebra: Any) -> Any:
        out = rewrite(algebra, self._change)
        self.uses = count_uses(out)
        return out

    def hide(self, hint: str) -> Var:
        var = self.fresh(hint)
        self.hidden.add(var)
        return var

    def _term(self, node: RdfTerm) -> RdfTerm:
        if isinstance(node, BlankTerm):
            var = self.blanks.get(node)
            if var is None:
                var = self.blanks[node] = self.hide("b")
            return var
        return node

    def _change(self, node: Any) -> Any:
        if isinstance(node, AlgebraNode) and node.name == "BGP":
            triples = [(self._term(s), p, self._term(o)) for s, p, o in node.triples]
            if all(fragment.triple_inside(t, triples) for t in triples):
                return copy_node(node, triples=triples)
            return expand_bgp(triples, self.hide)
        if isinstance(node, PropertyPath) or (isinstance(node, AlgebraNode) and node.name == "ServiceGraphPattern"):
            return node  # a SERVICE pattern is sent as written
        if isinstance(node, AlgebraNode) and member(node, "vars") == "*" and member(node, "distinct"):
            self.counts_all = True
            return None
        if isinstance(node, AlgebraNode) and node.name == "Project":
            inner = rewrite(node.p, self._change)
            # and not those of a SERVICE pattern, which goes as written
            services = [n for n in nodes(inner) if n.name == "ServiceGraphPattern"]
            shown = set(all_variables(node.PV)) | set(all_variables(services))
            # fresh, not hidden: a COUNT(DISTINCT *) of the subquery tells solutions apart by them
            local = {v: self.fresh(str(v)) for v in dict.fromkeys(all_variables(inner)) if v not in shown | self.hidden}
            if local:
                inner = rewrite(inner, lambda value: local.get(value) if isinstance(value, Var) else None)
            return copy_node(node, p=inner)
        return None


def count_uses(value: Any) -> Counter[Var]:
    """How many times each variable is used in a tree: once per leaf (BGP, closure) it occurs
    in, once per other mention (projections, expressions, VALUES, GRAPH...)."""
    counted: Counter[Var] = Counter()
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, AlgebraNode):
            if value.name in ("BGP", "PathClosure"):
                counted.update(set(maybe(value)))
                if value.name == "PathClosure":
                    stack.append(value.path)
                continue
            stack.extend(v for key, v in value.items() if not key.startswith("_"))
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend([*value.keys(), *value.values()])
        elif isinstance(value, Var):
            counted[value] += 1
    return counted


def nodes(value: Any) -> Iterator[AlgebraNode]:
    """Every node of a tree (patterns and expressions)."""
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, AlgebraNode):
            yield value
            stack.extend(v for key, v in value.items() if not key.startswith("_"))
        elif isinstance(value, list | tuple):
            stack.extend(value)


def has_optional(value: Any) -> bool:
    return any(node.name == "LeftJoin" for node in nodes(value))
