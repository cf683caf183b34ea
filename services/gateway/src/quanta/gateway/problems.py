"""RFC 9457 problem details: every error the API answers, with a stable `type`.

Types are absolute URIs `https://quanta.dev/problems/<slug>`; clients switch
on them (never on `title` or `detail`, which are for people). The slugs and
their statuses are the table in docs/protocol.md.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from quanta.gateway.logs import request_id

BASE = "https://quanta.dev/problems/"
MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("quanta.gateway")

# slug -> (status, title)
TYPES: dict[str, tuple[int, str]] = {
    "invalid-request": (400, "The request body is not a valid query request"),
    "syntax-error": (400, "The query does not parse"),
    "invalid-token": (400, "The next token was not issued by this service"),
    "invalid-plan": (400, "The saved plan cannot be resumed by this version"),
    "unknown-dataset": (404, "No such dataset"),
    "dataset-mismatch": (409, "The saved plan belongs to another dataset or another build of it"),
    "plan-expired": (410, "The saved plan has expired"),
    "body-too-large": (413, "The request body is too large"),
    "query-too-long": (413, "The query is too long"),
    "unsupported-operator": (422, "The query uses an operator the server does not evaluate"),
    "rate-limited": (429, "Too many requests from this client"),
    "internal": (500, "Internal error"),
    "dead-letter": (500, "The task failed on every worker that tried it"),
    "queue-full": (503, "The query queue is full"),
    "redis-unavailable": (503, "The queue is unreachable"),
    "reply-timeout": (504, "No worker replied in time"),
}


class Problem(Exception):
    """Raise anywhere in a request to answer with this problem."""

    def __init__(self, slug: str, detail: str = "", headers: dict[str, str] | None = None, **members: Any) -> None:
        status, title = TYPES[slug]
        super().__init__(detail or title)
        self.slug, self.status, self.title, self.detail = slug, status, title, detail
        self.headers = headers or {}
        self.members = {k: v for k, v in members.items() if v is not None}

    def body(self, instance: str = "") -> dict[str, Any]:
        doc: dict[str, Any] = {"type": BASE + self.slug, "title": self.title, "status": self.status}
        if self.detail:
            doc["detail"] = self.detail
        if instance:
            doc["instance"] = instance
        doc.update(self.members)
        rid = request_id.get()
        if rid:
            doc["request_id"] = rid
        return doc


def problem_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body).encode(), status_code=status, headers=headers, media_type=MEDIA_TYPE)


async def _on_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.body(request.url.path), exc.headers)


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
    problem = Problem("invalid-request", "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors))
    return problem_response(400, problem.body(request.url.path) | {"errors": errors})


async def _on_http(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 route, 405 method): plain `about:blank` problems."""
    assert isinstance(exc, HTTPException)
    title = HTTPStatus(exc.status_code).phrase
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": exc.status_code}
    if exc.detail and exc.detail != body["title"]:
        body["detail"] = str(exc.detail)
    return problem_response(exc.status_code, body, dict(exc.headers or {}))


async def _on_crash(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error", exc_info=exc)
    return problem_response(500, Problem("internal").body(request.url.path))


def install(app: FastAPI) -> None:
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_crash)


def openapi_responses(*slugs: str) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status with its problem types, for the OpenAPI document."""
    by_status: dict[int, list[str]] = {}
    for slug in slugs:
        by_status.setdefault(TYPES[slug][0], []).append(slug)
    return {
        status: {
            "description": ", ".join(f"`{s}`" for s in names),
            "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}},
        }
        for status, names in sorted(by_status.items())
    }
