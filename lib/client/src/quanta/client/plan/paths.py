"""The smart client's first pass over property paths: a BGP keeps the triple patterns the server
evaluates (`quanta.sparql.fragment.triple_inside`: terms, chains, and closures it can anchor);
the others become algebra (`quanta.sparql.paths`), closures a PathClosure the client expands
breadth first (ops/paths.py)."""

from __future__ import annotations

from typing import Any

from quanta.sparql import fragment
from quanta.sparql.paths import Fresh, expand, join_all
from quanta.sparql.syntax import AlgebraNode, RdfTerm


def expand_bgp(triples: list[tuple[RdfTerm, Any, RdfTerm]], fresh: Fresh) -> Any:
    """A BGP whose paths are not all the server's, as algebra."""
    inside = [fragment.triple_inside(t, triples) for t in triples]
    plain = [t for t, keep in zip(triples, inside, strict=True) if keep]
    parts: list[Any] = [AlgebraNode("BGP", triples=plain)] if plain else []
    for (s, path, o), keep in zip(triples, inside, strict=True):
        if not keep:
            parts.append(expand(s, path, o, fresh))
    return join_all(parts)
