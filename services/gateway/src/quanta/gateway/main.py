"""The application: `create_app(settings)` builds it; the lifespan opens Redis once per process.

uvicorn runs it as a factory (`quanta.gateway.main:create_app`), so each
worker process builds its own app from the same environment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from socket import gethostname
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException
from starlette.routing import Match

from quanta.client.budgets import Budgets, DiskPool
from quanta.client.requester import RequestEvent
from quanta.client.services import ServiceEndpoint, SparqlEndpoint
from quanta.client.smart import SmartClient
from quanta.common.catalog import Dataset, load_catalog
from quanta.gateway import metrics, problems
from quanta.gateway.api import web
from quanta.gateway.api.main import plain_routes, routers
from quanta.gateway.config import Settings, get_settings
from quanta.gateway.deps import Services
from quanta.gateway.middleware import Edge, EdgeLimit
from quanta.gateway.sparql_endpoint import routes as sparql_endpoint
from quanta.gateway.sparql_endpoint.fair_use import FairUse
from quanta.gateway.sparql_endpoint.first_quantum import FirstQuantum
from quanta.gateway.sparql_endpoint.transport import DispatcherTransport
from quanta.gateway.tasks.dispatch import Dispatcher
from quanta.gateway.v1.models import QueryRequest
from quanta.gateway.v1.tokens import Signer

log = logging.getLogger("quanta.gateway")
OPEN_AGAIN_S = 30.0
# What a page on another origin (YASGUI, say) may send: the form or query body, and an API key.
CORS_HEADERS = ["Accept", "Content-Type", "X-API-Key", "X-Request-ID"]
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")  # what a 405's Allow may list

DESCRIPTION = """Preemptive SPARQL: every request runs one time quantum of a query on some worker
and answers with the results so far and a `next` token that continues it. Errors are RFC 9457
problems (`application/problem+json`) with stable `type` URIs. See docs/protocol.md."""


def _version() -> str:
    try:
        return version("quanta-gateway")
    except PackageNotFoundError:
        return "0"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; the catalog and secrets are checked here, so a bad config fails at start."""
    settings = settings or get_settings()
    catalog = load_catalog(settings.catalog)
    signer = Signer(settings.signing_keys())
    metrics.init_datasets(list(catalog))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        dispatcher = Dispatcher.from_settings(settings)
        shards = dispatcher.shards
        fair_use = FairUse(
            shards, max_queries=settings.sparql_max_queries, rate=settings.sparql_query_rate,
            burst=settings.sparql_query_burst, retry_after_s=settings.retry_after_s,
            timeout_s=settings.redis.socket_timeout_s,
        )  # fmt: skip
        first: FirstQuantum | None = None
        opening: asyncio.Task[None] | None = None
        if settings.local_quantum_ms:
            first = FirstQuantum(catalog, settings.local_quantum_ms, settings.local_share, f"gateway@{gethostname()}")
            # what is indexed opens before the first request (memory-mapped: fast); the rest when it is
            if not await asyncio.to_thread(first.open):
                opening = asyncio.create_task(_open_local(first))
        app.state.services = Services(
            settings=settings, catalog=catalog, signer=signer, shards=shards, dispatcher=dispatcher,
            fair_use=fair_use, smart_client=smart_client(settings, catalog, dispatcher, first),
        )  # fmt: skip
        redis = [shard.name for shard in shards.all]
        log.info("gateway started", extra={"datasets": sorted(catalog), "redis": redis})
        try:
            yield
        finally:
            if opening is not None:
                opening.cancel()
            await shards.aclose()

    app = FastAPI(title="quanta", version=_version(), description=DESCRIPTION, lifespan=lifespan)
    problems.install(app)
    app.add_exception_handler(EdgeLimit, _on_edge_limit)
    app.add_exception_handler(405, _on_wrong_method)
    for router in routers:
        app.include_router(router)
    app.router.routes.extend(plain_routes)
    app.mount("/static", web.static_files(), name="static")  # the query page's files
    if settings.cors_origin_list():
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origin_list(), allow_methods=["GET", "POST"],
            allow_headers=CORS_HEADERS, expose_headers=["Retry-After", "X-Request-ID"], max_age=3600,
        )  # fmt: skip
    app.add_middleware(
        Edge, max_body_bytes=settings.max_body_bytes, body_timeout_s=settings.body_timeout_s,
        access_log=settings.access_log,
    )  # fmt: skip
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


async def _open_local(first: FirstQuantum) -> None:
    """Every OPEN_AGAIN_S, open what waited for its side index (a worker builds it), until none waits."""
    while True:
        await asyncio.sleep(OPEN_AGAIN_S)
        if await asyncio.to_thread(first.open):
            return


def smart_client(
    settings: Settings, catalog: dict[str, Dataset], dispatcher: Dispatcher, first: FirstQuantum | None = None
) -> SmartClient:
    """The SPARQL endpoint's client: quanta through the dispatcher, SERVICE only to the allowlist."""
    services: dict[str, ServiceEndpoint] = {iri: SparqlEndpoint(iri) for iri in settings.service_endpoints()}
    budgets = Budgets(
        memory_rows=settings.sparql_memory_rows, disk_bytes=settings.sparql_disk_bytes,
        temp_dir=settings.sparql_temp_dir or None, disk_pool=DiskPool(settings.sparql_spill_bytes_total),
    )  # fmt: skip
    transport = DispatcherTransport(dispatcher, catalog, first)
    return SmartClient(transport, budgets=budgets, services=services, on_request=_count_quantum)


def _count_quantum(event: RequestEvent) -> None:
    metrics.SPARQL_QUANTA.labels(event.status).inc()


async def _on_edge_limit(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EdgeLimit)
    problem = problems.Problem(exc.kind, str(exc.detail), limit=exc.limit)
    return problems.problem_response(exc.status_code, problem.body(request.url.path), dict(exc.headers or {}))


async def _on_wrong_method(request: Request, exc: Exception) -> Response:
    """Starlette's 405 names the methods of the first route of the path; Allow lists every method
    some route of the path takes (asked of the router itself: included routers hide their routes)."""
    routes = request.app.router.routes
    allowed = [m for m in METHODS if any(r.matches({**request.scope, "method": m})[0] is Match.FULL for r in routes)]
    handler = request.app.exception_handlers[HTTPException]  # problems.install's, for every Starlette error
    response: Response = await handler(request, HTTPException(405, headers={"Allow": ", ".join(allowed)}))
    return response


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus what it cannot see: ProblemDetails (error responses), QueryRequest
    (the query route parses its own body) and the SPARQL endpoint (Starlette routes)."""
    if app.openapi_schema is None:
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        doc["paths"] |= sparql_endpoint.openapi_paths()
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas["ProblemDetails"] = problems.problem_schema()
        schemas["QueryRequest"] = QueryRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        app.openapi_schema = doc
    return app.openapi_schema
