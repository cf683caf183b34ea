"""FILTER bounds that a scan can read as a range of the dictionary.

HDT's dictionary keeps literals in the byte order of their N-Triples spelling, so the
xsd:date values written `"YYYY-MM-DD` (and a timezone, or not) after a canonical date
lie together, in the order of their dates. A variable a group's FILTER holds between
two such dates, `?d >= "2007-10-10"^^xsd:date && ?d < "2007-11-07"^^xsd:date` (BSBM's
business-intelligence query 3), can only take values of a range of object ids: from
the first string at least `"2007-10-10` to the last that starts with `"2007-11-07`.
A scan of `?r p ?d` then reads that range of the object index instead of every triple
of `p`; the FILTER still decides each row, so the range need only hold every value
that passes it. It does, with both bounds canonical dates without a timezone:
- a value compares with them only if it is an xsd:date (`expr_values.compare`);
- a date with a timezone lies within 14 hours of its date, so XSD's order never puts
  one written with an earlier day at or past the lower bound, nor a later day before
  the upper one (`expr_dates.compare_datetimes`); the upper bound's own day is kept;
- a negative year sorts before every digit and is below the lower bound; a year of
  five digits or more sorts among the four-digit ones but is above the upper bound.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from quanta.sparql.expr_dates import parse_date
from quanta.sparql.syntax import LiteralTerm, Var

XSD_DATE = "http://www.w3.org/2001/XMLSchema#date"
_CANONICAL_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}

ObjectRange = tuple[bytes, bytes]  # the dictionary strings [low, high) a variable's values lie in


def date_ranges(conditions: Iterable[Any]) -> dict[Var, ObjectRange]:
    """The variables `conditions` (a group's FILTER conjuncts, all of which hold for each
    of its solutions) hold between two canonical dates, with the strings bounding them."""
    lows: dict[Var, str] = {}
    highs: dict[Var, str] = {}
    for condition in conditions:
        if getattr(condition, "name", None) != "RelationalExpression":
            continue
        op, left, right = condition.op, condition.expr, condition.other
        if isinstance(right, Var):
            left, right, op = right, left, _FLIPPED.get(op)
        if not isinstance(left, Var) or not _canonical_date(right):
            continue
        if op in (">", ">="):
            lows[left] = max(lows.get(left, right), str(right))
        elif op in ("<", "<="):
            highs[left] = min(highs.get(left, right), str(right))
    return {
        var: (f'"{lows[var]}'.encode(), f'"{highs[var]}'.encode() + b"\xff")  # 0xff: after every UTF-8 byte
        for var in lows.keys() & highs.keys()
    }


def _canonical_date(term: Any) -> bool:
    return (
        isinstance(term, LiteralTerm)
        and str(term.datatype) == XSD_DATE
        and _CANONICAL_DATE.fullmatch(term) is not None
        and parse_date(str(term)) is not None
    )
