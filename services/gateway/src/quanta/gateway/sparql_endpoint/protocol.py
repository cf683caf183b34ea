"""The SPARQL 1.1 Protocol's query operation, read from an HTTP request.

Three ways to send a query (SPARQL 1.1 Protocol, section 2.1):

    GET  ?query=...&default-graph-uri=...&named-graph-uri=...
    POST application/x-www-form-urlencoded, the same parameters in the body
         (and, as the W3C protocol tests send them, in the URL too)
    POST application/sparql-query, the query as the body (UTF-8), the graphs in the URL

Exactly one `query`; parameters the protocol does not define are ignored
(SPARQLWrapper adds `format`, `output`, `results`). Updates are refused: the
service is read-only. A GET without any `query` is not a query at all: the
route answers it with the service description.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from starlette.requests import Request

from quanta.gateway.problems import Problem
from quanta.sparql.errors import ErrorKind

FORM = "application/x-www-form-urlencoded"
DIRECT = "application/sparql-query"
UPDATE = "application/sparql-update"
READ_ONLY = "this endpoint is read-only: it answers queries, never updates"


@dataclass(frozen=True, slots=True)
class QueryOperation:
    """A query and the RDF dataset the protocol names for it (empty: the query's own, or the service's)."""

    query: str
    default_graphs: tuple[str, ...] = field(default=())
    named_graphs: tuple[str, ...] = field(default=())


def media_type(header: str | None) -> tuple[str, dict[str, str]]:
    """A Content-Type's media type (lower case) and its parameters."""
    media, *params = (part.strip() for part in (header or "").split(";"))
    values = {}
    for param in params:
        name, _, value = param.partition("=")
        values[name.strip().lower()] = value.strip().strip('"')
    return media.lower(), values


async def read_operation(request: Request) -> QueryOperation | None:
    """The query operation of a GET or POST; None for a GET that asks no query
    (the service description). Raises Problem (400, 415) for what the protocol refuses."""
    params = _pairs(request.scope.get("query_string", b""), "the URL's query string")
    if request.method == "POST":
        params += await _body_params(request)
    elif not any(name in ("query", "update") for name, _ in params):
        return None
    if any(name == "update" for name, _ in params):  # beside a query too: never ignored (protocol, 2.2)
        raise Problem(ErrorKind.INVALID_REQUEST, READ_ONLY)
    queries = [value for name, value in params if name == "query"]
    if not queries:
        raise Problem(ErrorKind.INVALID_REQUEST, f"no `query`: send one (GET ?query=, a form or {DIRECT})")
    if len(queries) > 1:
        raise Problem(ErrorKind.INVALID_REQUEST, f"{len(queries)} `query` parameters: send exactly one")
    return QueryOperation(
        query=queries[0],
        default_graphs=tuple(value for name, value in params if name == "default-graph-uri"),
        named_graphs=tuple(value for name, value in params if name == "named-graph-uri"),
    )


async def _body_params(request: Request) -> list[tuple[str, str]]:
    """The parameters a POST body carries: a form's fields, or the query itself."""
    media, params = media_type(request.headers.get("content-type"))
    if media == UPDATE:
        raise Problem(ErrorKind.UNSUPPORTED_MEDIA_TYPE, READ_ONLY)
    if media not in (FORM, DIRECT):
        given = f"Content-Type {media!r}" if media else "no Content-Type"
        raise Problem(ErrorKind.UNSUPPORTED_MEDIA_TYPE, f"{given}: POST a query as {DIRECT} or as a {FORM} form")
    charset = params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise Problem(ErrorKind.UNSUPPORTED_MEDIA_TYPE, f"charset {charset!r}: queries are sent in UTF-8")
    body = await request.body()
    if media == DIRECT:
        return [("query", _utf8(body, "the body"))]
    return _pairs(body, "the form")


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Problem(ErrorKind.INVALID_REQUEST, f"{what} is not UTF-8: {error}") from error


def _pairs(raw: bytes, what: str) -> list[tuple[str, str]]:
    """URL-encoded name=value pairs, percent-escapes read as UTF-8."""
    try:
        return parse_qsl(_utf8(raw, what), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as error:
        raise Problem(ErrorKind.INVALID_REQUEST, f"{what} is not UTF-8 once unescaped: {error}") from error
