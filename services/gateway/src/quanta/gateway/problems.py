"""RFC 9457 problem details: every error the API answers, with a stable `type`.

Types are absolute URIs `https://quanta.dev/problems/<slug>`; clients switch
on them (never on `title` or `detail`, which are for people). Slugs, statuses
and titles are the error kinds of `quanta.sparql.errors`, the table in
docs/protocol.md.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from quanta.common.logs import request_id
from quanta.gateway.tasks.dispatch import Failed, Failure, RedisDown, ReplyTimeout, WrongReply
from quanta.queue.v1 import queue_pb2
from quanta.sparql.errors import ErrorKind

MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("quanta.gateway")


class Problem(Exception):
    """Raise anywhere in a request to answer with this problem."""

    def __init__(
        self, kind: ErrorKind, detail: str = "", headers: dict[str, str] | None = None, **members: Any
    ) -> None:
        super().__init__(detail or kind.title)
        self.kind, self.status, self.title, self.detail = kind, kind.status, kind.title, detail
        self.headers = headers or {}
        self.members = {k: v for k, v in members.items() if v is not None}

    def body(self, instance: str = "") -> dict[str, Any]:
        doc: dict[str, Any] = {"type": self.kind.uri, "title": self.title, "status": self.status}
        if self.detail:
            doc["detail"] = self.detail
        if instance:
            doc["instance"] = instance
        doc.update(self.members)
        rid = request_id.get()
        if rid:
            doc["request_id"] = rid
        return doc


def worker_problem(error: queue_pb2.Error) -> Problem:
    """The problem for a worker's error reply."""
    kind = ErrorKind.of(error.kind)
    if kind is ErrorKind.SYNTAX_ERROR:
        return Problem(kind, error.message, line=error.line, column=error.column)
    if kind is ErrorKind.UNSUPPORTED_OPERATOR:
        return Problem(kind, error.message, operator=error.operator)
    if kind is ErrorKind.INTERNAL:
        # Don't leak a worker's internals to clients; its logs have the details.
        return Problem(kind, "the worker failed to run this quantum", worker_error=error.kind or None)
    return Problem(kind, error.message)


def outcome_problem(outcome: Failure, **members: Any) -> Problem:
    """The problem for a dispatch that gave no page (`members`: what the
    surface adds, e.g. the `next` of a reply timeout)."""
    if isinstance(outcome, Failed):
        return worker_problem(outcome.error)
    if isinstance(outcome, ReplyTimeout):
        detail = f"no worker replied within {outcome.timeout_s:g} s; send `next` to resume"
    elif isinstance(outcome, RedisDown):
        detail = "the task queue cannot be reached; retry the same request"
    elif isinstance(outcome, WrongReply):
        return Problem(outcome.kind, "a worker answered with another task's reply")
    else:
        detail = outcome.detail  # which limit refused it
    retry = str(outcome.retry_after_s)
    return Problem(outcome.kind, detail, headers={"Retry-After": retry}, retry_after=outcome.retry_after_s, **members)


def problem_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body).encode(), status_code=status, headers=headers, media_type=MEDIA_TYPE)


async def _on_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.body(request.url.path), exc.headers)


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
    problem = Problem(
        ErrorKind.INVALID_REQUEST, "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
    )
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
    return problem_response(500, Problem(ErrorKind.INTERNAL).body(request.url.path))


def install(app: FastAPI) -> None:
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_crash)


def openapi_responses(*kinds: ErrorKind) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status with its problem types, for the OpenAPI document."""
    by_status: dict[int, list[str]] = {}
    for kind in kinds:
        by_status.setdefault(kind.status, []).append(kind.slug)
    return {
        status: {
            "description": ", ".join(f"`{s}`" for s in names),
            "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/ProblemDetails"}}},
        }
        for status, names in sorted(by_status.items())
    }


class ProblemDetails(BaseModel):
    """RFC 9457 problem details; `type` is stable, other members depend on it."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["https://quanta.dev/problems/syntax-error"])
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    request_id: str | None = None
    line: int | None = Field(None, description="syntax-error: 1-based line")
    column: int | None = Field(None, description="syntax-error: 1-based column")
    operator: str | None = Field(None, description="unsupported-operator: the operator refused")
    next: str | None = Field(None, description="reply-timeout: send it back to resume without losing anything")
    retry_after: int | None = Field(None, description="seconds, as in the Retry-After header")


def problem_schema() -> dict[str, Any]:
    return ProblemDetails.model_json_schema(ref_template="#/components/schemas/{model}")
