"""GET /metrics: HTTP and query counters, and queue gauges read from Redis at scrape time."""

from __future__ import annotations

import time

import redis
from prometheus_client.parser import text_string_to_metric_families

from quanta.common import keys
from quanta.testkit.gateway import paging_handler

QUERY = "SELECT * WHERE { ?s ?p ?o }"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_move(settings, serve, consumer) -> None:
    consumer(paging_handler(pages=2))
    client = serve(settings(rate_limit=0.01, rate_burst=2))
    before = client.get("/metrics").text
    first = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).json()
    client.post("/v1/datasets/watdiv/query", json={"next": first["next"]})
    client.post("/v1/datasets/watdiv/query", json={"next": "forged"})
    client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    client.post("/v1/datasets/watdiv/query", json={"query": QUERY})  # a 3rd query in a burst of 2 (`next` is free)
    after = client.get("/metrics").text

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = "/v1/datasets/{name}/query"
    assert delta("quanta_http_requests_total", route=route, method="POST", status="200") == 3
    assert delta("quanta_http_requests_total", route=route, method="POST", status="400") == 1
    assert delta("quanta_http_requests_total", route=route, method="POST", status="429") == 1
    assert delta("quanta_http_request_duration_seconds_count", route=route) == 5
    assert delta("quanta_queries_started_total", dataset="watdiv") == 2
    assert delta("quanta_queries_completed_total", dataset="watdiv") == 1
    assert delta("quanta_rejected_total", reason="invalid_token") == 1
    assert delta("quanta_rejected_total", reason="rate_limited") == 1
    for reason in ("queue_full", "redis_down", "too_large"):
        assert ("quanta_rejected_total", (("reason", reason),)) in samples(after)
    assert ("quanta_queries_started_total", (("dataset", "other"),)) in samples(after)  # zero, but exported


def test_queue_gauges_from_redis(settings, serve) -> None:
    client = serve(settings())
    text = client.get("/metrics").text
    assert value(text, "quanta_redis_up", shard="0") == 1 and value(text, "quanta_queue_depth", shard="0") == 0
    assert ("quanta_queue_pending", (("shard", "0"),)) not in samples(text)  # no stream, no group yet
    r = redis.Redis.from_url(settings().redis.url)
    r.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    for _ in range(5):
        r.xadd(keys.TASKS, {"task": b"t"})
    r.xreadgroup(keys.GROUP, "w1", {keys.TASKS: ">"}, count=2)
    r.zadd(keys.WORKERS, {"w1": time.time(), "w2": time.time(), "gone": time.time() - 60})
    text = client.get("/metrics").text
    assert value(text, "quanta_queue_depth", shard="0") == 5
    assert value(text, "quanta_queue_pending", shard="0") == 2
    assert value(text, "quanta_queue_lag", shard="0") == 3
    assert value(text, "quanta_workers", shard="0") == 2


def test_reply_timeouts_counted(settings, serve) -> None:
    client = serve(settings(reply_timeout_s=0.1))
    before = value(client.get("/metrics").text, "quanta_reply_timeouts_total")
    assert client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).status_code == 504
    assert value(client.get("/metrics").text, "quanta_reply_timeouts_total") == before + 1
