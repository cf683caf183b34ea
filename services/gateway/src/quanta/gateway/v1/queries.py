"""POST /v1/datasets/{name}/query: start or continue a query, one quantum per request."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from quanta.common.catalog import Dataset
from quanta.gateway import metrics
from quanta.gateway.deps import Services
from quanta.gateway.problems import Problem, openapi_responses, outcome_problem
from quanta.gateway.sparql_endpoint.streaming import query_problem
from quanta.gateway.tasks.admission import client_id
from quanta.gateway.tasks.dispatch import Answered, Failed, ReplyTimeout
from quanta.gateway.tasks.pages import page_body, stats
from quanta.gateway.v1.models import QueryPage, QueryRequest
from quanta.gateway.v1.tokens import InvalidToken, Kind, Signer, Token
from quanta.queue.v1 import queue_pb2
from quanta.sparql import bounds
from quanta.sparql.errors import ErrorKind, QuantaError

router = APIRouter(prefix="/v1/datasets", tags=["queries"])

MODES = {
    "auto": queue_pb2.PLAN_MODE_AUTO,
    "value": queue_pb2.PLAN_MODE_VALUE,
    "reference": queue_pb2.PLAN_MODE_REFERENCE,
}
PROBLEMS = openapi_responses(*ErrorKind)  # this route can answer with every kind
bounds.limits()  # the parser's limits (QUANTA_PARSE_BUDGET_S, ...): a bad value fails the start, not a query


# The body is parsed here rather than declared as a parameter: FastAPI's dependency
# and body machinery cost more than the rest of the route (docs/benchmarks.md), so
# the OpenAPI document names the schema itself.
REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QueryRequest"}}},
    }
}


@router.post(
    "/{name}/query",
    response_class=Response,
    responses={200: {"model": QueryPage, "description": "a page of results"}, **PROBLEMS},
    summary="Run one quantum of a query",
    openapi_extra=REQUEST_BODY,
)
async def query(name: str, request: Request) -> Response:
    """Start a query with `{"query": ...}`, then send each page's `next` back until it is null.

    Each request runs one quantum on some worker; the saved plan comes back in
    `next`, signed (by value) or as a signed reference to Redis.
    """
    services: Services = request.app.state.services
    settings = services.settings
    body = _parse(await request.body())
    client = client_id(request, settings)
    dataset = services.catalog.get(name)
    if dataset is None:
        raise Problem(ErrorKind.UNKNOWN_DATASET, f"no dataset named {name!r}; GET /v1/datasets lists them")
    task = queue_pb2.Task(id=uuid.uuid4().hex, dataset=name)
    request.state.task_id = task.id  # the access log line joins the worker's logs on it
    mode, before_ms = _input(task, body, dataset, services.signer, settings.max_query_chars)
    task.plan_mode = mode or MODES[dataset.plan_mode]  # type: ignore[assignment]

    # Only a new query is charged to the client's rate limit: a `next` token, signed, proves
    # its query was admitted, so a long query's later quanta never throttle it (as /sparql).
    outcome = await services.dispatcher.run(client, task, charge=body.query is not None)
    if task.WhichOneof("input") == "query" and isinstance(outcome, Answered | Failed | ReplyTimeout):
        metrics.QUERIES_STARTED.labels(name).inc()
    if isinstance(outcome, ReplyTimeout):
        kind = Kind.PARTIAL_QUERY if task.partial else Kind.QUERY
        start = Token(kind, name, task.query.encode(), mode, task.graph, elapsed_ms=0)
        resume = body.next or services.signer.sign(start)
        raise outcome_problem(outcome, next=resume)
    if not isinstance(outcome, Answered):
        raise outcome_problem(outcome)

    page = outcome.page
    # the service's time on the query: its earlier pages' round trips (carried by the token), and this one's
    elapsed = None if before_ms is None else before_ms + outcome.round_trip_ms
    carried = None if elapsed is None else round(elapsed)
    where = page.WhichOneof("next")
    if where == "plan":
        token: str | None = services.signer.sign(Token(Kind.VALUE, name, page.plan, mode, task.graph, carried))
    elif where == "plan_ref":
        ref = page.plan_ref.encode()
        token = services.signer.sign(Token(Kind.REFERENCE, name, ref, mode, task.graph, carried))
    else:
        token = None
        metrics.QUERIES_COMPLETED.labels(name).inc()
    plan = {"plan": "value", "plan_ref": "reference"}.get(where or "")
    body_bytes = page_body(page, token, stats(page, plan, outcome.round_trip_ms, elapsed))
    return Response(body_bytes, media_type="application/json")


def _parse(raw: bytes) -> QueryRequest:
    """The request body, or the 400 FastAPI would give for it."""
    try:
        return QueryRequest.model_validate_json(raw)
    except ValidationError as error:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in error.errors()]) from error


def _check(query: str) -> None:
    """The parser's linear pre-check, here before the task is queued (the worker parses it,
    within the parse budget): a query past a limit, or not text, never reaches a worker."""
    try:
        bounds.check(query)
    except QuantaError as error:
        raise query_problem(error) from None


def _input(
    task: queue_pb2.Task, body: QueryRequest, dataset: Dataset, signer: Signer, max_chars: int
) -> tuple[int, float | None]:
    """Fill the task's input from the request; returns the plan mode asked for (0: the dataset's), and the
    service's time on the query before this request (0 for a new query; None when its token does not say)."""
    if body.query is not None:
        if len(body.query) > max_chars:
            metrics.REJECTED.labels("too_large").inc()
            raise Problem(
                ErrorKind.QUERY_TOO_LONG, f"{len(body.query)} characters; this service takes up to {max_chars}"
            )
        _check(body.query)
        if body.graph and dataset.graph(body.graph) is None:
            raise Problem(ErrorKind.UNKNOWN_GRAPH, f"dataset {dataset.name} has no graph <{body.graph}>")
        task.query = body.query
        task.partial = body.partial
        task.whole = body.whole
        task.graph = body.graph or ""
        return MODES[body.plan] if body.plan else 0, 0.0
    try:
        token = signer.verify(body.next or "")
    except InvalidToken as error:
        metrics.REJECTED.labels("invalid_token").inc()
        raise Problem(ErrorKind.INVALID_TOKEN, str(error)) from error
    if token.dataset != dataset.name:
        raise Problem(
            ErrorKind.DATASET_MISMATCH, f"this token continues a query on {token.dataset!r}, not {dataset.name!r}"
        )
    if body.graph is not None and body.graph != token.graph:
        raise Problem(ErrorKind.DATASET_MISMATCH, f"this token continues a query on graph <{token.graph or 'default'}>")
    task.graph = token.graph
    if token.kind is Kind.VALUE:
        task.plan = token.payload
    elif token.kind is Kind.REFERENCE:
        task.plan_ref = token.payload.decode()
    else:
        task.query = token.payload.decode()
        task.partial = token.kind is Kind.PARTIAL_QUERY
    return MODES[body.plan] if body.plan else token.mode, token.elapsed_ms
