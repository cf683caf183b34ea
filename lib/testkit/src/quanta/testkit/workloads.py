"""WatDiv query variants that exercise the smart client (its differential
tests, `bench/client.py`, and the load test's OPTIONAL mix).

A WatDiv basic query is a SELECT over one BGP. Its variants put client-side
operators around that BGP: OPTIONAL (the SaGe paper's protocol: the triple
pattern with the most matches moves into an OPTIONAL), DISTINCT,
aggregates, ORDER BY with and without LIMIT, MINUS, NOT EXISTS, a
subquery, CONSTRUCT. `PATHS` are property-path queries over WatDiv's
social graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"
_HEAD = re.compile(r"SELECT\s+(.*?)\s+WHERE", re.IGNORECASE | re.DOTALL)
_TRIPLE = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s*\.\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Bgp:
    variables: list[str]  # the SELECT's, without "?"
    triples: list[tuple[str, str, str]]  # as written (IRIs in <>, ?variables)

    def text(self, triples: list[tuple[str, str, str]] | None = None) -> str:
        return " ".join(f"{s} {p} {o} ." for s, p, o in (self.triples if triples is None else triples))

    def variables_of(self, triple: tuple[str, str, str]) -> set[str]:
        return {t[1:] for t in triple if t.startswith("?")}


def parse_bgp(query: str) -> Bgp:
    head = _HEAD.search(query)
    assert head is not None, query
    variables = [v.lstrip("?") for v in head.group(1).split()]
    triples = [(m.group(1), m.group(2), m.group(3)) for m in _TRIPLE.finditer(query)]
    return Bgp(variables, triples)


def connected(bgp: Bgp, triples: list[tuple[str, str, str]]) -> bool:
    """Whether the triple patterns share variables all the way (no cross product)."""
    if not triples:
        return False
    reached = bgp.variables_of(triples[0])
    left = list(triples[1:])
    while left:
        joined = [t for t in left if bgp.variables_of(t) & reached]
        if not joined:
            return False
        for t in joined:
            reached |= bgp.variables_of(t)
            left.remove(t)
    return True


def optional_variant(query: str, count: Callable[[str], int]) -> str | None:
    """Q' = (Q minus tp) OPTIONAL { tp }, tp the triple pattern with the most
    matches (`count` gives a triple pattern's); None when the rest would not
    be connected (a cross product) or tp is the only one."""
    bgp = parse_bgp(query)
    if len(bgp.triples) < 2:
        return None
    largest = max(bgp.triples, key=lambda t: count(f"{t[0]} {t[1]} {t[2]} ."))
    rest = [t for t in bgp.triples if t != largest]
    if not connected(bgp, rest) or not (bgp.variables_of(largest) & set().union(*map(bgp.variables_of, rest))):
        return None
    head = " ".join(f"?{v}" for v in bgp.variables)
    return f"SELECT {head} WHERE {{ {bgp.text(rest)} OPTIONAL {{ {bgp.text([largest])} }} }}"


def variants(query: str, count: Callable[[str], int]) -> dict[str, str]:
    """The client-side variants of one basic query, by name."""
    bgp = parse_bgp(query)
    head = " ".join(f"?{v}" for v in bgp.variables)
    first, last = bgp.variables[0], bgp.variables[-1]
    where = bgp.text()
    out: dict[str, str] = {}
    optional = optional_variant(query, count)
    if optional is not None:
        out["optional"] = optional
        # a FILTER of the group on the left side's variable: it moves into the left side's piece
        out["optional-filter"] = optional[:-1] + f"FILTER(STRLEN(STR(?{first})) > 42) }}"
    out["distinct"] = f"SELECT DISTINCT ?{first} WHERE {{ {where} }}"
    out["aggregates"] = (
        f"SELECT ?{first} (COUNT(*) AS ?n) (COUNT(DISTINCT ?{last}) AS ?d) (MIN(?{last}) AS ?lo) "
        f"(MAX(?{last}) AS ?hi) WHERE {{ {where} }} GROUP BY ?{first}"
    )
    out["count"] = f"SELECT (COUNT(*) AS ?n) WHERE {{ {where} }}"
    out["order"] = f"SELECT {head} WHERE {{ {where} }} ORDER BY ?{last} DESC(?{first})"
    out["order-limit"] = f"SELECT {head} WHERE {{ {where} }} ORDER BY DESC(?{last}) ?{first} LIMIT 7"
    if len(bgp.triples) >= 2:
        rest, tail = bgp.triples[:-1], bgp.triples[-1]
        if connected(bgp, rest) and bgp.variables_of(tail) & set().union(*map(bgp.variables_of, rest)):
            out["minus"] = f"SELECT * WHERE {{ {bgp.text(rest)} MINUS {{ {bgp.text([tail])} }} }}"
            out["not-exists"] = f"SELECT * WHERE {{ {bgp.text(rest)} FILTER NOT EXISTS {{ {bgp.text([tail])} }} }}"
    out["subquery"] = (
        f"SELECT ?{first} ?n WHERE {{ {{ SELECT ?{first} (COUNT(*) AS ?n) WHERE {{ {where} }} GROUP BY ?{first} }} "
        f"FILTER(?n >= 1) }}"
    )
    out["construct"] = f"CONSTRUCT {{ {where} }} WHERE {{ {where} }}"
    return out


# Property paths over WatDiv's users (follows, friendOf) and what they like.
PATHS = {
    "follows+": f"SELECT ?y WHERE {{ <{WSDBM}User1> <{WSDBM}follows>+ ?y }}",
    "follows*-reverse": f"SELECT ?x WHERE {{ ?x <{WSDBM}follows>* <{WSDBM}User10> }}",
    "friendOf?": f"SELECT ?x ?y WHERE {{ ?x <{WSDBM}subscribes> <{WSDBM}Website7> . ?x <{WSDBM}friendOf>? ?y }}",
    "sequence": f"SELECT ?x ?y WHERE {{ ?x <{WSDBM}follows>/<{WSDBM}likes> ?y }}",
    "alternative": f"SELECT ?x ?y WHERE {{ ?x <{WSDBM}likes>|<{WSDBM}subscribes> ?y }}",
    "inverse": f"SELECT ?x WHERE {{ <{WSDBM}Product0> ^<{WSDBM}likes> ?x }}",
    "negated": f"SELECT ?y WHERE {{ <{WSDBM}User1> !(<{WSDBM}follows>|<{WSDBM}friendOf>) ?y }}",
    "closure-of-sequence": (
        f"SELECT ?y WHERE {{ <{WSDBM}User10> (<{WSDBM}follows>/<{WSDBM}likes>/^<{WSDBM}likes>)+ ?y }}"
    ),
    "bound-ends": f"ASK {{ <{WSDBM}User1> <{WSDBM}follows>* <{WSDBM}User5> }}",
    "joined": (
        f"SELECT ?x ?y WHERE {{ ?x <{WSDBM}subscribes> <{WSDBM}Website7> . ?x <{WSDBM}follows>+ ?y . "
        f"?y <{WSDBM}likes> ?z }}"
    ),
}
