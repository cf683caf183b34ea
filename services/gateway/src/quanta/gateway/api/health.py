"""Probes and metrics: /healthz (the process answers), /readyz (it can serve queries), /metrics."""

from __future__ import annotations

import asyncio
import time
from typing import Literal

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from redis.asyncio import Redis
from redis.exceptions import RedisError

from quanta.common import keys
from quanta.gateway import metrics
from quanta.gateway.deps import ShardsDep


class Health(BaseModel):
    status: Literal["ok"]


class ShardReadiness(BaseModel):
    redis: bool = Field(description="the shard's Redis answered PING")
    workers: int = Field(description="the shard's workers with a recent heartbeat")


class Readiness(BaseModel):
    status: Literal["ready", "not-ready"]
    redis: bool = Field(description="Redis answered PING (every shard's)")
    workers: int = Field(description="workers with a recent heartbeat (in all shards)")
    shards: list[ShardReadiness] = Field(description="each shard of the queue, in order")


router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers (Redis is not checked)")
async def healthz() -> Health:
    # Restarting the gateway would not fix Redis, so liveness must not depend on it.
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Redis unreachable or no live worker"}},
    summary="Readiness: every shard's Redis answers and has a worker with a recent heartbeat",
)
async def readyz(shards: ShardsDep) -> JSONResponse:
    states = await asyncio.gather(*(_shard_readiness(shard.redis) for shard in shards.all))
    # every shard, since tasks go to each: one without a worker would leave its share unanswered
    ready = all(s.redis and s.workers > 0 for s in states)
    body = Readiness(
        status="ready" if ready else "not-ready", redis=all(s.redis for s in states),
        workers=sum(s.workers for s in states), shards=states,
    )  # fmt: skip
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


async def _shard_readiness(redis: Redis) -> ShardReadiness:
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.ping()
            pipe.zcount(keys.WORKERS, time.time() - keys.WORKER_STALE_S, "+inf")
            _, workers = await pipe.execute()
    except (RedisError, OSError):
        return ShardReadiness(redis=False, workers=0)
    return ShardReadiness(redis=True, workers=int(workers))


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}},
    summary="Prometheus metrics (queue gauges read from Redis at scrape time)",
)
async def scrape(shards: ShardsDep) -> Response:
    snapshots = await asyncio.gather(*(metrics.read_queue(shard.redis) for shard in shards.all))
    return Response(metrics.exposition(list(snapshots)), media_type=CONTENT_TYPE_LATEST)
