"""Protecting the service: rate limit, bounded queue, Redis down, reply timeout."""

from __future__ import annotations

import hashlib
import shutil
import threading
import time

import pytest
import redis

from quanta.common import keys
from quanta.common.redis_server import RedisServer, free_port
from quanta.gateway.tasks.admission import fairness_key
from quanta.queue.v1 import queue_pb2
from quanta.testkit.gateway import paging_handler, problem

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
    # An invented API key changes nothing: the client is still its address.
    invented = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-api-key": "made-up"})
    problem(invented, 429, "rate-limited")


def test_only_authenticated_keys_have_their_own_bucket(settings, serve, consumer) -> None:
    consumer()
    known = hashlib.sha256(b"someone-else").hexdigest()
    client = serve(settings(rate_limit=0.5, rate_burst=1, api_key_hashes=f"{'0' * 64}, {known.upper()}"))
    assert client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).status_code == 200
    problem(client.post("/v1/datasets/watdiv/query", json={"query": QUERY}), 429, "rate-limited")
    other = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-api-key": "someone-else"})
    assert other.status_code == 200
    # Keys are hashed: they never reach Redis.
    assert rate_buckets(settings().redis.url) == {"quanta:rate:ip:127.0.0.1", f"quanta:rate:key:{known[:32]}"}


def test_api_key_hashes_must_be_sha256(settings) -> None:
    with pytest.raises(ValueError, match="QUANTA_API_KEY_HASHES"):
        settings(api_key_hashes="not-a-digest")


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
    assert rate_buckets(settings().redis.url) == {"quanta:rate:ip:127.0.0.1", "quanta:rate:ip:198.51.100.7"}


def test_an_ipv6_client_is_its_64(settings, serve, consumer) -> None:
    consumer()
    client = serve(settings(rate_limit=1, trust_forwarded=True))
    for ip in ("2001:db8:0:7::1", "2001:db8:0:7:ffff::2", "::ffff:198.51.100.8", "198.51.100.9"):
        client.post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-forwarded-for": ip})
    assert rate_buckets(settings().redis.url) == {
        "quanta:rate:ip:2001:db8:0:7::/64", "quanta:rate:ip:198.51.100.8", "quanta:rate:ip:198.51.100.9"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("not an address", "not an address"),
    ],
)
def test_the_fairness_key_of_an_address(address: str, key: str) -> None:
    assert fairness_key(address) == key


def test_new_work_stops_short_of_the_reserve(settings, serve) -> None:
    """Of a queue of 10, 2 are kept for running /sparql queries' later tasks: a /v1 query is refused at 8."""
    client = serve(settings(max_queue=10, queue_reserve=0.2))
    r = redis.Redis.from_url(settings().redis.url)
    r.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    for _ in range(8):
        r.xadd(keys.TASKS, {"task": b"queued"})
    body = problem(client.post("/v1/datasets/watdiv/query", json={"query": QUERY}), 503, "queue-full")
    assert "holds 8 tasks" in body["detail"] and "2 more are kept" in body["detail"], body
    assert r.xlen(keys.TASKS) == 8


def test_full_queue_503(settings, serve) -> None:
    client = serve(settings(max_queue=3, retry_after_s=7))
    r = redis.Redis.from_url(settings().redis.url)
    r.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    for _ in range(3):
        r.xadd(keys.TASKS, {"task": b"queued"})
    response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    problem(response, 503, "queue-full")
    assert response.headers["retry-after"] == "7"
    assert r.xlen(keys.TASKS) == 3


def test_redis_unreachable_503_quickly(settings, serve) -> None:
    client = serve(settings(redis={"url": f"redis://127.0.0.1:{free_port()}/0"}))
    started = time.monotonic()
    response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY})
    assert time.monotonic() - started < 2
    problem(response, 503, "redis-unavailable")
    assert response.headers["retry-after"] == "1"
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json() == {
        "status": "not-ready",
        "redis": False,
        "workers": 0,
        "shards": [{"redis": False, "workers": 0}],
    }
    assert client.get("/healthz").status_code == 200
    assert 'quanta_redis_up{shard="0"} 0.0' in client.get("/metrics").text


def test_redis_dies_while_waiting_503_quickly(settings, serve, consumer) -> None:
    own = RedisServer().start()
    try:
        client = serve(settings(redis={"url": own.url}, reply_timeout_s=10))
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
    r = redis.Redis.from_url(settings().redis.url)
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
    r = redis.Redis.from_url(settings().redis.url)
    not_ready = {"status": "not-ready", "redis": True, "workers": 0, "shards": [{"redis": True, "workers": 0}]}
    assert client.get("/readyz").json() == not_ready
    r.zadd(keys.WORKERS, {"stale": time.time() - keys.WORKER_STALE_S - 1})
    assert client.get("/readyz").status_code == 503
    consumer()
    deadline = time.monotonic() + 2
    while (ready := client.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready.json() == {"status": "ready", "redis": True, "workers": 1, "shards": [{"redis": True, "workers": 1}]}
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


def test_a_client_holds_at_most_its_share_of_the_queue(settings, serve) -> None:
    """Queued or running tasks count against their client's share (continuations too); past it the
    client gets 429 too-many-tasks while others are still admitted; an answered or withdrawn task
    frees its place without any release from the gateway."""
    client = serve(settings(max_client_tasks=2, max_queue=10, reply_timeout_s=2, trust_forwarded=True))
    r = redis.Redis.from_url(settings().redis.url)
    statuses: list[int] = []

    def send(ip: str) -> None:
        statuses.append(
            client.post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-forwarded-for": ip}).status_code
        )

    waiting = [threading.Thread(target=send, args=("198.51.100.1",)) for _ in range(2)]
    for t in waiting:
        t.start()
    deadline = time.monotonic() + 2
    while r.xlen(keys.TASKS) < 2:  # nobody reads the stream: both stay queued
        assert time.monotonic() < deadline
        time.sleep(0.01)
    refused = client.post(
        "/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-forwarded-for": "198.51.100.1"}
    )
    body = problem(refused, 429, "too-many-tasks")
    assert refused.headers["retry-after"] == "1" and "2 tasks" in body["detail"]
    other = threading.Thread(target=send, args=("198.51.100.2",))
    other.start()
    while r.xlen(keys.TASKS) < 3:  # another client is admitted
        assert time.monotonic() < deadline + 1
        time.sleep(0.01)
    for t in [*waiting, other]:
        t.join()
    assert statuses == [504, 504, 504]  # no worker: each timed out and was withdrawn
    assert r.xlen(keys.TASKS) == 0
    again = threading.Thread(target=send, args=("198.51.100.1",))
    again.start()
    while r.xlen(keys.TASKS) < 1:  # its places are free again
        assert time.monotonic() < deadline + 5
        time.sleep(0.01)
    again.join()


def test_redis_at_maxmemory_503_queue_full(settings, serve) -> None:
    own = RedisServer().start()
    try:
        client = serve(settings(redis={"url": own.url}, retry_after_s=3, sparql_max_queries=2))
        redis.Redis.from_url(own.url).config_set("maxmemory", 1)  # noeviction: every write is refused
        for response in [
            client.post("/v1/datasets/watdiv/query", json={"query": QUERY}),
            client.post("/sparql", data={"query": QUERY}),
        ]:
            body = problem(response, 503, "queue-full")
            assert response.headers["retry-after"] == "3" and "maxmemory" in body["detail"]
    finally:
        own.stop()
        shutil.rmtree(own.dir, ignore_errors=True)
