"""The SPARQL 1.1 Protocol endpoint: `GET`/`POST /sparql/{dataset}`, and `/sparql`
for the catalog's default dataset.

Any SPARQL 1.1 query: the smart client runs in the gateway, sending the
server fragment's pieces to the workers as tasks (one quantum each) and
evaluating the rest here; results stream as they come (streaming.py). A
`GET` without a query answers the service description.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from quanta.client.smart import DatasetSpec
from quanta.client.transport import QueryError
from quanta.common.catalog import Dataset, default_dataset
from quanta.gateway import metrics
from quanta.gateway.deps import Services
from quanta.gateway.problems import Problem, openapi_responses
from quanta.gateway.sparql_endpoint import answers, description
from quanta.gateway.sparql_endpoint.negotiation import EVENTS, GRAPHS, RESULTS, Offer, accepted, negotiate
from quanta.gateway.sparql_endpoint.progress import Progress
from quanta.gateway.sparql_endpoint.protocol import QueryOperation, read_operation
from quanta.gateway.sparql_endpoint.streaming import ResultStream, query_problem
from quanta.gateway.tasks.admission import client_id
from quanta.sparql import graphs
from quanta.sparql.errors import ErrorKind

RESPONSES = {
    "200": {
        "description": "The results (streamed), or the service description for a GET without a query",
        "content": {offer.media_type: {} for offer in (*RESULTS, *GRAPHS, EVENTS)},
    },
    **{str(status): response for status, response in openapi_responses(*ErrorKind).items()},
}
# What the OpenAPI document says of a request, as the service reads it (protocol.py). A
# query is a "sparql-query" string: JSON Schema cannot say which strings parse.
QUERY = {"type": "string", "minLength": 1, "format": "sparql-query"}
GRAPHS_PARAMETERS = [
    {"name": "default-graph-uri", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
    {"name": "named-graph-uri", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
]
GET_PARAMETERS = [
    {"name": "query", "in": "query", "schema": QUERY, "description": "the query; none: the service description"},
    *GRAPHS_PARAMETERS,
]
# A POST carries its query in its body (a form's `query`, or the body itself), its graphs in the URL or the form.
POST_BODY = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object", "required": ["query"],
                "properties": {"query": QUERY, **{g["name"]: g["schema"] for g in GRAPHS_PARAMETERS}},
            }
        },
        "application/sparql-query": {"schema": QUERY},
    },
}  # fmt: skip
DATASET_PARAMETER = {"name": "dataset", "in": "path", "required": True, "schema": {"type": "string"}}


async def default_endpoint(request: Request) -> Response:
    """Any SPARQL 1.1 query on the catalog's default dataset (see `/sparql/{dataset}`)."""
    services: Services = request.app.state.services
    return await _answer(request, default_dataset(services.catalog))


async def dataset_endpoint(request: Request) -> Response:
    """`GET ?query=`, `POST` a form or `application/sparql-query`: the results,
    streamed, in the negotiated format (SPARQL JSON by default; Turtle for
    graphs). Without a query, `GET` answers the service description."""
    services: Services = request.app.state.services
    dataset = request.path_params["dataset"]
    found = services.catalog.get(dataset)
    if found is None:
        raise Problem(ErrorKind.UNKNOWN_DATASET, f"no dataset named {dataset!r}; GET /v1/datasets lists them")
    return await _answer(request, found)


# Plain Starlette routes, not FastAPI's: the endpoint reads its own request (protocol.py), and
# FastAPI's per-request handling (its route class, parameters, exit stack) was 9% of a small
# query's time in the gateway, 15% after the process had been idle for 20 ms (2026-11-27).
def _route(path: str, endpoint: Callable[[Request], Awaitable[Response]], **options: Any) -> Route:
    route = Route(path, endpoint, methods=["GET", "POST"], **options)
    route.methods = {"GET", "POST"}  # not the HEAD Starlette adds: it would run the query for nothing
    return route


routes = [
    _route("/sparql", default_endpoint),
    _route("/sparql/", default_endpoint, include_in_schema=False),
    _route("/sparql/{dataset}", dataset_endpoint),
]


def openapi_paths() -> dict[str, Any]:
    """The routes' entries in the OpenAPI document (FastAPI documents only its own routes)."""

    def operation(endpoint: Callable[..., Any], summary: str, method: str, path: list[Any]) -> dict[str, Any]:
        found: dict[str, Any] = {"tags": ["sparql"], "summary": summary, "description": inspect.getdoc(endpoint)}
        found["operationId"] = f"{endpoint.__name__}_{method}"
        found["parameters"] = path + (GET_PARAMETERS if method == "get" else GRAPHS_PARAMETERS)
        if method == "post":
            found["requestBody"] = POST_BODY
        return found | {"responses": RESPONSES}

    default = "SPARQL 1.1 Protocol endpoint of the default dataset"
    by_name = "SPARQL 1.1 Protocol endpoint of a dataset"
    return {
        "/sparql": {m: operation(default_endpoint, default, m, []) for m in ("get", "post")},
        "/sparql/{dataset}": {m: operation(dataset_endpoint, by_name, m, [DATASET_PARAMETER]) for m in ("get", "post")},
    }


async def _answer(request: Request, dataset: Dataset) -> Response:
    started = time.perf_counter()
    services: Services = request.app.state.services
    operation = await read_operation(request)
    if operation is None:
        return _description(request, dataset, services)
    if len(operation.query) > services.settings.max_query_chars:
        metrics.REJECTED.labels("too_large").inc()
        limit = services.settings.max_query_chars
        raise Problem(ErrorKind.QUERY_TOO_LONG, f"{len(operation.query)} characters; this service takes up to {limit}")
    lease = await services.fair_use.admit(client_id(request, services.settings))
    try:
        return await _stream(request, dataset, operation, services, lease.release, started)
    except BaseException:
        await lease.release()
        raise


async def _stream(
    request: Request, dataset: Dataset, operation: QueryOperation, services: Services,
    release: Callable[[], Awaitable[None]], started: float,
) -> Response:  # fmt: skip
    progress = Progress()
    try:
        # relative IRIs resolve against the URL the query was sent to (RFC 3986's retrieval URI)
        endpoint = description.origin(request.scope, services.settings.public_url) + request.url.path
        execution = await services.smart_client.prepare(
            operation.query, _dataset_spec(dataset, operation), on_request=progress.on_request, base=endpoint
        )
    except QueryError as error:
        metrics.SPARQL_QUERIES.labels("unknown", "failed").inc()
        raise query_problem(error) from error
    progress.follow(execution)
    offers = (*(RESULTS if execution.form in ("select", "ask") else GRAPHS), EVENTS)
    offer = negotiate(request.headers.get("accept"), offers)
    if offer is None:
        await execution.aclose()
        metrics.SPARQL_QUERIES.labels(execution.form, "failed").inc()
        raise Problem(
            ErrorKind.NOT_ACCEPTABLE, f"a {execution.form.upper()} query's results are one of: {accepted(offers)}"
        )
    events = offer is EVENTS
    produce, render = progress.producer(execution) if events else answers.producer(execution, offer.format)

    async def close() -> None:
        try:
            await execution.aclose()
        finally:
            await release()

    return ResultStream(
        produce, render, content_type=offer.content_type,
        headers={"Vary": "Accept", **({"Cache-Control": "no-store"} if events else {})},
        form=execution.form, fmt=offer.format, close=close, started_at=started,
        failure=progress.failure if events else None,
    )  # fmt: skip


def _dataset_spec(dataset: Dataset, operation: QueryOperation) -> DatasetSpec:
    """The protocol's dataset, when it names one, overrides the query's FROM and FROM NAMED."""
    if not operation.default_graphs and not operation.named_graphs:
        return DatasetSpec(dataset.name)
    return DatasetSpec(dataset.name, operation.default_graphs, operation.named_graphs)


def _description(request: Request, dataset: Dataset, services: Services) -> Response:
    offer: Offer | None = negotiate(request.headers.get("accept"), GRAPHS)
    if offer is None:
        raise Problem(ErrorKind.NOT_ACCEPTABLE, f"the service description is one of: {accepted(GRAPHS)}")
    base = description.origin(request.scope, services.settings.public_url)
    endpoint = base + request.url.path
    federated = bool(services.settings.service_endpoints())
    page = base + request.app.url_path_for("query_page") + "?" + urlencode({"dataset": dataset.name})
    triples = description.service_description(endpoint, dataset, federated, page)
    text = graphs.write_graph(offer.format, triples, description.PREFIXES if offer.format == "ttl" else None)
    return Response(text, media_type=offer.content_type, headers={"Vary": "Accept"})
