"""Protecting the service: rate limit, bounded queue, Redis down, reply timeout."""

from __future__ import annotations

import shutil
import threading
import time

import redis

from quanta.common import keys
from quanta.common.testing import RedisServer, free_port
from quanta.gateway.testing import paging_handler, problem
from quanta.queue.v1 import queue_pb2

QUERY = "SELECT * WHERE { ?s ?p ?o }"


def rate_buckets(redis_url: str) -> set[str]:
    """The rate limiter's buckets in Redis, by key."""
    return {str(k) for k in redis.Redis.from_url(redis_url, decode_responses=True).keys("quanta:rate:*")}


def test_rate_limit_429_with_retry_after(settings, serve, consumer) -> None:
    consumer()
    client = serve(settings(rate_limit=0.5, rate_burst=2))
    ok = [client.post("/v1/datasets/watdiv/query", json={"query": QUERY}) for _ in range(2)]
    assert [r.status_code for r in ok] == [200, 200]
    limited = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    body = problem(limited, 429, "rate-limited")
    assert limited.headers["retry-after"] == "2" == str(body["retry_after"])  # one token per 2 s
    # Buckets are per client: another API key has its own.
    other = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-api-key": "someone-else"})
    assert other.status_code == 200
    assert not any(k.startswith("quanta:rate:key:someone") for k in rate_buckets(settings().redis_url))


def test_rate_limit_refills(settings, serve, consumer) -> None:
    consumer()
    client = serve(settings(rate_limit=20, rate_burst=1))
    assert client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).status_code == 200
    assert client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).status_code == 429
    time.sleep(0.06)
    assert client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).status_code == 200


def test_forwarded_address_only_when_trusted(settings, serve, consumer) -> None:
    consumer()
    spoof = {"x-forwarded-for": "203.0.113.9, 198.51.100.7"}
    serve(settings(rate_limit=1)).post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers=spoof)
    serve(settings(rate_limit=1, trust_forwarded=True)).post(
        "/v1/datasets/watdiv/query", json={"query": QUERY}, headers=spoof
    )
    assert rate_buckets(settings().redis_url) == {"quanta:rate:ip:127.0.0.1", "quanta:rate:ip:198.51.100.7"}


def test_full_queue_503(settings, serve) -> None:
    client = serve(settings(max_queue=3, retry_after_s=7))
    r = redis.Redis.from_url(settings().redis_url)
    r.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    for _ in range(3):
        r.xadd(keys.TASKS, {"task": b"queued"})
    response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    problem(response, 503, "queue-full")
    assert response.headers["retry-after"] == "7"
    assert r.xlen(keys.TASKS) == 3


def test_redis_unreachable_503_quickly(settings, serve) -> None:
    client = serve(settings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    started = time.monotonic()
    response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    assert time.monotonic() - started < 2
    problem(response, 503, "redis-unavailable")
    assert response.headers["retry-after"] == "1"
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json() == {"status": "not-ready", "redis": False, "workers": 0}
    assert client.get("/healthz").status_code == 200
    assert "quanta_redis_up 0.0" in client.get("/metrics").text


def test_redis_dies_while_waiting_503_quickly(settings, serve, consumer) -> None:
    own = RedisServer().start()
    try:
        client = serve(settings(redis_url=own.url, reply_timeout_s=10))
        killer = threading.Timer(0.3, own.stop)
        killer.start()
        started = time.monotonic()
        response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
        assert time.monotonic() - started < 3
        problem(response, 503, "redis-unavailable")
        killer.join()  # stop() has finished: the next start() is the one finally stops
        own.start()  # back, empty: retrying the same request works
        consumer(url=own.url)
        assert client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).status_code == 200
    finally:
        own.stop()
        shutil.rmtree(own.dir, ignore_errors=True)


def test_reply_timeout_504_then_resume_loses_nothing(settings, serve, consumer) -> None:
    client = serve(settings(reply_timeout_s=0.3))
    r = redis.Redis.from_url(settings().redis_url)
    response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    body = problem(response, 504, "reply-timeout")
    assert response.headers["retry-after"] == "1" and body["next"]
    assert r.xlen(keys.TASKS) == 0  # withdrawn: nobody would read its reply
    worker = consumer(paging_handler(pages=2))
    first = client.post("/v1/datasets/watdiv/query", json={"next": body["next"]})
    assert first.status_code == 200 and worker.tasks[0].query == QUERY  # the query restarted from its text
    # A timeout while resuming hands back the token that was sent: the same state, nothing skipped.
    worker.stop()
    token = first.json()["next"]
    again = problem(client.post("/v1/datasets/watdiv/query", json={"next": token}), 504, "reply-timeout")
    assert again["next"] == token
    worker = consumer(paging_handler(pages=2))
    last = client.post("/v1/datasets/watdiv/query", json={"next": again["next"]}).json()
    assert [b["x"]["value"] for b in last["results"]["bindings"]] == ["2.0", "2.1"] and last["next"] is None


def test_reply_timeout_keeps_requested_mode(settings, serve, consumer) -> None:
    client = serve(settings(reply_timeout_s=0.2))
    body = client.post("/v1/datasets/watdiv/query", json={"query": QUERY, "plan": "reference"}).json()
    worker = consumer()
    assert client.post("/v1/datasets/watdiv/query", json={"next": body["next"]}).status_code == 200
    assert worker.tasks[0].plan_mode == queue_pb2.PLAN_MODE_REFERENCE


def test_late_reply_after_timeout_is_not_read_by_the_next_request(settings, serve, consumer) -> None:
    """Each request has its own reply list: a reply arriving after a 504 expires, never misroutes."""
    slow = threading.Event()

    def handler(task: queue_pb2.Task) -> queue_pb2.Reply | None:
        if not slow.is_set():
            slow.set()
            time.sleep(0.5)
        return paging_handler(pages=1)(task)

    consumer(handler)
    client = serve(settings(reply_timeout_s=0.25))
    problem(client.post("/v1/datasets/watdiv/query", json={"query": QUERY}), 504, "reply-timeout")
    time.sleep(0.4)
    page = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    assert page.status_code == 200 and page.json()["next"] is None


def test_readyz_needs_a_live_worker(settings, serve, consumer) -> None:
    client = serve(settings())
    r = redis.Redis.from_url(settings().redis_url)
    assert client.get("/readyz").json() == {"status": "not-ready", "redis": True, "workers": 0}
    r.zadd(keys.WORKERS, {"stale": time.time() - keys.WORKER_STALE_S - 1})
    assert client.get("/readyz").status_code == 503
    consumer()
    deadline = time.monotonic() + 2
    while (ready := client.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready.json() == {"status": "ready", "redis": True, "workers": 1}
    assert client.get("/healthz").json() == {"status": "ok"}


def test_only_new_queries_are_charged_not_their_next_pages(settings, serve, consumer) -> None:
    """A `next` token proves its query was admitted: a query of many pages is not
    throttled by its own quanta, while new queries still are."""
    consumer(paging_handler(pages=6))
    client = serve(settings(rate_limit=0.5, rate_burst=1))
    page = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    pages = 1
    while page.json()["next"] is not None:
        page = client.post("/v1/datasets/watdiv/query", json={"next": page.json()["next"]})
        assert page.status_code == 200, page.text
        pages += 1
    assert pages == 6
    problem(client.post("/v1/datasets/watdiv/query", json={"query": QUERY}), 429, "rate-limited")
