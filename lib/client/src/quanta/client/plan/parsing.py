"""The client's view of a parsed query: its algebra, base IRI and what the text says of its variables."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind, QuantaError, QuerySyntaxError, QueryTooComplex, UnsupportedQuery
from quanta.sparql.parse import bounded_async, read

_VARIABLE = re.compile(r"[?$]([A-Za-z0-9_\u00B7\u00C0-\uFFFF]+)")
_SELECT = re.compile(r"(?<![\w:?$])SELECT\b", re.IGNORECASE)
_STAR = re.compile(r"SELECT\s+(?:(?:DISTINCT|REDUCED)\s+)?\*", re.IGNORECASE)
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|<[^<>\s]*>|#[^\n]*')


@dataclass(frozen=True, slots=True)
class Query:
    algebra: Any  # the query form's node: SelectQuery, AskQuery, ConstructQuery, DescribeQuery
    base: str | None
    prologue: str  # PREFIX and BASE declarations, for text sent to SERVICE endpoints
    star: bool  # the top-level SELECT is `SELECT *`
    order: dict[str, int]  # variable name -> position of its first occurrence in the text
    # what the server does not evaluate (quanta.sparql.fragment.query_refusals); none: the server
    # evaluates the whole query, which then has no GRAPH, SERVICE or FROM anywhere
    refusals: tuple[str, ...] = ()
    # what a worker cannot run when it runs the query whole (fragment.whole_refusals), worked
    # out when asked, once per tree (`ParsedQuery.whole_refusals`)
    whole_refusals: Callable[[], tuple[str, ...]] = tuple


async def parse_query(text: str, base: str | None = None) -> Query:
    """Parse within `quanta.sparql.bounds`, on a parse thread (the event loop runs
    meanwhile), relative IRIs against `base`; a syntax error is a QueryError with its line and column."""
    try:
        return await bounded_async(lambda: _query(text, base), text, base)
    except QuantaError as error:
        raise query_error(error) from error


def query_error(error: QuantaError) -> QueryError:
    """An engine error as the client reports it, with the members it names: a syntax error's
    position, the operator the server refuses, the limit a query is past."""
    if isinstance(error, QuerySyntaxError):
        return QueryError(ErrorKind.SYNTAX_ERROR, error.message, line=error.line, column=error.column)
    if isinstance(error, UnsupportedQuery):
        return QueryError(error.kind, str(error), operator=error.operator)
    return QueryError(error.kind, str(error), limit=error.limit if isinstance(error, QueryTooComplex) else None)


def _query(text: str, base: str | None) -> Query:
    parsed = read(text, base)
    code = _STRINGS_AND_COMMENTS.sub(" ", text)
    first_select = _SELECT.search(code)
    star = first_select is not None and _STAR.match(code, first_select.start()) is not None
    order: dict[str, int] = {}
    for match in _VARIABLE.finditer(code):
        order.setdefault(match.group(1), len(order))
    # the parser writes every IRI absolute: text sent to a SERVICE needs no declarations
    return Query(
        parsed.algebra.algebra, parsed.algebra.prologue.base, "", star, order, parsed.refusals, parsed.whole_refusals
    )
