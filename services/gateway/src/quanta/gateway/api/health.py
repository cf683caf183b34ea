"""Probes and metrics: /healthz (the process answers), /readyz (it can serve queries), /metrics."""

from __future__ import annotations

import time
from typing import Literal

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from quanta.common import keys
from quanta.gateway import metrics
from quanta.gateway.deps import RedisDep


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not-ready"]
    redis: bool = Field(description="Redis answered PING")
    workers: int = Field(description="workers with a recent heartbeat")


router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers (Redis is not checked)")
async def healthz() -> Health:
    # Restarting the gateway would not fix Redis, so liveness must not depend on it.
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Redis unreachable or no live worker"}},
    summary="Readiness: Redis answers and at least one worker has a recent heartbeat",
)
async def readyz(redis: RedisDep) -> JSONResponse:
    workers, reachable = 0, False
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.ping()
            pipe.zcount(keys.WORKERS, time.time() - keys.WORKER_STALE_S, "+inf")
            _, workers = await pipe.execute()
        reachable = True
    except (RedisError, OSError):
        pass
    ready = reachable and workers > 0
    body = Readiness(status="ready" if ready else "not-ready", redis=reachable, workers=int(workers))
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}},
    summary="Prometheus metrics (queue gauges read from Redis at scrape time)",
)
async def scrape(redis: RedisDep) -> Response:
    snapshot = await metrics.read_queue(redis)
    return Response(metrics.exposition(snapshot), media_type=CONTENT_TYPE_LATEST)
