"""The variables of a tree and of a graph pattern in the query's algebra (`quanta.sparql.syntax`): those it
may bind and those every solution binds (SPARQL 1.1, section 18.2.1). PathClosure is the
smart client's node for a property path it evaluates (`quanta.client.plan.paths`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from quanta.sparql.syntax import AlgebraNode, Var


def all_variables(value: Any) -> Iterator[Var]:
    """Every variable in a tree (expressions, EXISTS patterns, paths' ends included), in order."""
    found: list[Var] = []
    _collect(value, found)
    return iter(found)


def _collect(value: Any, found: list[Var]) -> None:
    # a plain recursion, not generators: a query's compile walks its tree a dozen times
    if isinstance(value, Var):
        found.append(value)
    elif isinstance(value, AlgebraNode):
        for key, v in value.items():
            if key.startswith("_"):
                continue
            if isinstance(v, Var):
                found.append(v)
            elif not isinstance(v, str):  # other terms are leaves
                _collect(v, found)
    elif isinstance(value, list | tuple):
        for v in value:
            if isinstance(v, Var):
                found.append(v)
            elif not isinstance(v, str):
                _collect(v, found)
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(k, found)
            _collect(v, found)


def maybe(node: Any) -> set[Var]:
    """Variables a graph pattern may bind (its in-scope variables, SPARQL 1.1 section 18.2.1)."""
    name = node.name
    if name == "BGP":
        return {t for triple in node.triples for t in triple if isinstance(t, Var)}
    if name == "PathClosure":
        return {t for t in (node.subject, node.object) if isinstance(t, Var)}
    if name in ("Join", "Union", "LeftJoin"):
        return maybe(node.p1) | maybe(node.p2)
    if name == "Minus":
        return maybe(node.p1)
    if name == "Extend":
        return maybe(node.p) | {node.var}
    if name == "values":
        return {v for row in node.res for v in row}
    if name == "Graph":
        return maybe(node.p) | ({node.term} if isinstance(node.term, Var) else set())
    if name == "ServiceGraphPattern":
        return set(all_variables(node.graph)) | ({node.term} if isinstance(node.term, Var) else set())
    if name == "Project":
        return {v for v in node.PV if isinstance(v, Var)}
    if name == "AggregateJoin":
        group = node.p
        keys = {v for v in group.get("expr") or [] if isinstance(v, Var)}
        return keys | {a.res for a in node.A}
    if name in ("Filter", "ToMultiSet", "Slice", "Distinct", "Reduced", "OrderBy", "Group"):
        return maybe(node.p)
    raise ValueError(f"unexpected pattern {name}")


def certain(node: Any) -> set[Var]:
    """Variables every solution of a pattern binds."""
    name = node.name
    if name in ("BGP", "PathClosure"):
        return maybe(node)
    if name == "Join":
        return certain(node.p1) | certain(node.p2)
    if name == "Union":
        return certain(node.p1) & certain(node.p2)
    if name in ("LeftJoin", "Minus"):
        return certain(node.p1)
    if name == "values":
        return {v for v in maybe(node) if all(row.get(v, "UNDEF") != "UNDEF" for row in node.res)}
    if name == "Graph":
        return certain(node.p) | ({node.term} if isinstance(node.term, Var) else set())
    if name == "Project":
        return certain(node.p) & maybe(node)
    if name in ("ServiceGraphPattern", "AggregateJoin"):
        return set()
    if name in ("Filter", "Extend", "ToMultiSet", "Slice", "Distinct", "Reduced", "OrderBy", "Group"):
        return certain(node.p)
    raise ValueError(f"unexpected pattern {name}")
