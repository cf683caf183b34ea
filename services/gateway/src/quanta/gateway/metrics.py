"""Prometheus metrics of the gateway.

Counters and histograms live in this process; with several uvicorn processes
set PROMETHEUS_MULTIPROC_DIR (before start, to an empty directory) and every
process writes its values there, and a scrape of any one of them sums them all
(`quanta gateway --workers N` does it for you). Queue gauges are never stored:
they are read from Redis at scrape time, so they are right whichever process
answers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from redis.asyncio import Redis
from redis.exceptions import RedisError

from quanta.common import keys

# `_created` series double the output and no dashboard of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)
REJECT_REASONS = (
    "queue_full", "rate_limited", "redis_down", "invalid_token", "too_large", "too_many_queries", "query_rate",
    "too_many_tasks", "header_timeout", "body_timeout", "send_timeout", "connections",
    "connections_per_address",
)  # fmt: skip

HTTP_REQUESTS = Counter(
    "quanta_http_requests", "HTTP requests answered", ["route", "method", "status"], registry=REGISTRY
)
HTTP_DURATION = Histogram(
    "quanta_http_request_duration_seconds",
    "Time to answer an HTTP request, queue wait and quantum included",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
QUERIES_STARTED = Counter(
    "quanta_queries_started", "Tasks that start a query from its text", ["dataset"], registry=REGISTRY
)
QUERIES_COMPLETED = Counter(
    "quanta_queries_completed", "Pages that end a query (next is null)", ["dataset"], registry=REGISTRY
)
REPLY_TIMEOUTS = Counter("quanta_reply_timeouts", "Requests answered 504: no worker replied in time", registry=REGISTRY)
REJECTED = Counter("quanta_rejected", "Requests refused before reaching a worker", ["reason"], registry=REGISTRY)
for _reason in REJECT_REASONS:
    REJECTED.labels(_reason)

# The SPARQL endpoint (/sparql). Outcomes: completed; failed (an HTTP error
# before any result: syntax, refused, 406...); aborted (failed after results
# were sent: the response is cut short); disconnected (the client left: the
# query stopped at its next quantum).
SPARQL_FORMS = ("select", "ask", "construct", "describe")
SPARQL_OUTCOMES = ("completed", "failed", "aborted", "disconnected")
SPARQL_QUERIES = Counter(
    "quanta_sparql_queries", "SPARQL endpoint queries, by form and how they ended", ["form", "outcome"],
    registry=REGISTRY,
)  # fmt: skip
SPARQL_BYTES = Counter(
    "quanta_sparql_streamed_bytes", "Result bytes the SPARQL endpoint sent", ["format"], registry=REGISTRY
)
SPARQL_QUANTA = Counter(
    "quanta_sparql_quanta", "Quanta (tasks) the SPARQL endpoint's queries ran, by status (ok or an error kind)",
    ["status"], registry=REGISTRY,
)  # fmt: skip
# First quanta the gateway ran itself (sparql_endpoint/first_quantum.py): complete (answered without a worker),
# suspended (the rest went to the workers), failed (a query the engine refuses); queued: sent to the
# workers instead, the gateway's share of time for them being spent.
LOCAL_QUANTA = Counter(
    "quanta_gateway_local_quanta", "First quanta of /sparql pieces the gateway ran itself, by outcome",
    ["outcome"], registry=REGISTRY,
)  # fmt: skip
for _outcome in ("complete", "suspended", "failed", "queued", "unfinished"):
    LOCAL_QUANTA.labels(_outcome)
SPARQL_FIRST_RESULT = Histogram(
    "quanta_sparql_first_result_seconds",
    "From the request to the first bytes of results (or the whole answer, when it comes at once)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
for _form in SPARQL_FORMS:
    for _outcome in SPARQL_OUTCOMES:
        SPARQL_QUERIES.labels(_form, _outcome)
# How good the progress estimate was, once a /sparql query's driving piece completed: for each of its
# quanta, the fraction it reported minus the fraction of the piece's time elapsed then (sparql_endpoint/progress.py).
# Negative: the estimate lagged; positive: it ran ahead.
PROGRESS_ERROR = Histogram(
    "quanta_progress_estimate_error",
    "Each quantum's estimated fraction done minus the fraction of its query's time elapsed by then, "
    "observed when the query completes (/sparql)",
    buckets=(-1, -0.5, -0.3, -0.2, -0.1, -0.05, -0.02, 0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1),
    registry=REGISTRY,
)


def init_datasets(names: list[str]) -> None:
    """Export zeros for every dataset, so rates exist before the first query."""
    for name in names:
        QUERIES_STARTED.labels(name)
        QUERIES_COMPLETED.labels(name)


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    redis_up: bool
    depth: int | None = None
    pending: int | None = None
    lag: int | None = None
    workers: int | None = None


async def read_queue(redis: Redis) -> QueueSnapshot:
    """One pipelined round trip: stream length, consumer group, live heartbeats."""
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.xlen(keys.TASKS)
            pipe.zcount(keys.WORKERS, time.time() - keys.WORKER_STALE_S, "+inf")
            pipe.xinfo_groups(keys.TASKS)
            depth, workers, groups = await pipe.execute(raise_on_error=False)
    except (RedisError, OSError):
        return QueueSnapshot(redis_up=False)
    if isinstance(depth, Exception) or isinstance(workers, Exception):
        return QueueSnapshot(redis_up=False)
    pending = lag = None
    if not isinstance(groups, Exception):  # no stream yet: no group either
        for group in groups:
            if _text(group.get("name")) == keys.GROUP:
                pending, lag = group.get("pending"), group.get("lag")
    return QueueSnapshot(redis_up=True, depth=int(depth), pending=pending, lag=lag, workers=int(workers))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class QueueCollector(Collector):
    """Gauges from one snapshot of each shard's Redis, taken for this scrape (label `shard`: its index)."""

    def __init__(self, snapshots: list[QueueSnapshot]) -> None:
        self.snapshots = snapshots

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("quanta_redis_up", "Whether this scrape reached the shard's Redis", labels=["shard"])
        for shard, s in enumerate(self.snapshots):
            up.add_metric([str(shard)], float(s.redis_up))
        yield up
        gauges = [
            ("quanta_queue_depth", "Tasks in the shard's stream (queued or being run)", "depth"),
            ("quanta_queue_pending", "Tasks delivered to a worker and not acknowledged yet", "pending"),
            ("quanta_queue_lag", "Tasks not yet delivered to any worker", "lag"),
            ("quanta_workers", "The shard's workers with a heartbeat newer than the staleness limit", "workers"),
        ]
        for name, doc, attribute in gauges:
            family = GaugeMetricFamily(name, doc, labels=["shard"])
            for shard, s in enumerate(self.snapshots):
                value = getattr(s, attribute)
                if value is not None:
                    family.add_metric([str(shard)], float(value))
            if family.samples:
                yield family


def exposition(snapshots: list[QueueSnapshot]) -> bytes:
    """The text format for one scrape: this process's (or all processes') metrics, then the queue's."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        local = CollectorRegistry()
        MultiProcessCollector(local)  # type: ignore[no-untyped-call]
    else:
        local = REGISTRY
    queue = CollectorRegistry(auto_describe=False)
    queue.register(QueueCollector(snapshots))
    return generate_latest(local) + generate_latest(queue)
