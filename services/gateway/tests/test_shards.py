"""The queue sharded over two real Redis servers (tasks/shards.py), each with its own in-test
consumer: tasks spread over both, a plan kept by reference resumes in the shard that keeps it, a
shard that refuses or is down passes the task on, and the probes and metrics see every shard."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from quanta.common import keys
from quanta.common.redis_server import RedisServer, free_port, redis_server
from quanta.common.settings import RedisSettings, SettingsError
from quanta.gateway.config import Settings
from quanta.gateway.tasks.dispatch import Answered, Failed, RateLimited, TooManyTasks
from quanta.queue.v1 import queue_pb2
from quanta.sparql.errors import ErrorKind
from quanta.testkit.gateway import dispatch, follow, new_task, paging_handler
from quanta.worker.config import WorkerSettings


@pytest.fixture(scope="module")
def second_redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def two(redis_url: str, second_redis: RedisServer) -> list[str]:
    """Two shards' URLs, both emptied for each test."""
    redis.Redis.from_url(second_redis.url).flushall()
    return [redis_url, second_redis.url]


@pytest.fixture
def sharded(settings: Callable[..., Settings], two: list[str]) -> Callable[..., Settings]:
    return lambda **more: settings(redis={"url": ",".join(two)}, **more)


QUERY = "SELECT ?x WHERE { ?x ?p ?o }"


def new_tasks(n: int) -> list[queue_pb2.Task]:
    return [new_task() for _ in range(n)]


def test_new_tasks_spread_over_the_shards(sharded, two, consumer) -> None:
    workers = [consumer(url=url) for url in two]
    outcomes = dispatch(sharded(), new_tasks(40))
    assert all(isinstance(o, Answered) for o in outcomes)
    # each task is offered first to a shard drawn at random: 40 in one shard would be a 1 in 2^39 chance
    assert sorted(len(w.tasks) for w in workers)[0] >= 1 and sum(len(w.tasks) for w in workers) == 40


def test_a_plan_kept_by_reference_resumes_in_its_shard(sharded, two, consumer) -> None:
    workers = [consumer(paging_handler(pages=4), url=url) for url in two]
    first = new_task()
    first.plan_mode = queue_pb2.PLAN_MODE_REFERENCE
    (page,) = dispatch(sharded(), [first])
    assert isinstance(page, Answered)
    keeper = next(i for i, w in enumerate(workers) if w.tasks)
    assert page.page.plan_ref == f"{keeper}:{first.id}-1"  # the shard's index, then the worker's reference
    given = []  # the references the gateway gave, each resumed in turn
    for _ in range(3):
        given.append(page.page.plan_ref)
        task = queue_pb2.Task(id=uuid.uuid4().hex, dataset="watdiv", plan_mode=queue_pb2.PLAN_MODE_REFERENCE)
        task.plan_ref = page.page.plan_ref
        (page,) = dispatch(sharded(), [task])
        assert isinstance(page, Answered)
    assert page.page.WhichOneof("next") is None
    assert [len(w.tasks) for w in workers][keeper] == 4 and [len(w.tasks) for w in workers][1 - keeper] == 0
    # the worker gets its own reference back, without the shard's index
    assert all(ref.startswith(f"{keeper}:") for ref in given)
    assert [f"{keeper}:{t.plan_ref}" for t in workers[keeper].tasks[1:]] == given


@pytest.mark.parametrize("ref", ["7:abc-1", "abc-1", "x:abc-1"])
def test_a_reference_to_a_shard_this_gateway_lacks_is_expired(sharded, ref) -> None:
    task = queue_pb2.Task(id=uuid.uuid4().hex, dataset="watdiv", plan_ref=ref)
    (outcome,) = dispatch(sharded(), [task])
    assert isinstance(outcome, Failed) and outcome.kind is ErrorKind.PLAN_EXPIRED


def test_a_full_shard_passes_its_tasks_on(sharded, two, consumer) -> None:
    full = redis.Redis.from_url(two[0])
    full.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    full.xadd(keys.TASKS, {"task": b"queued"})  # max_queue=1: no room, and no worker to make some
    worker = consumer(url=two[1])
    outcomes = dispatch(sharded(max_queue=1), new_tasks(8))
    assert all(isinstance(o, Answered) for o in outcomes) and len(worker.tasks) == 8
    assert full.xlen(keys.TASKS) == 1


def test_a_shard_that_is_down_passes_its_tasks_on(settings, two, consumer) -> None:
    worker = consumer(url=two[1])
    down = f"redis://127.0.0.1:{free_port()}/0"
    outcomes = dispatch(settings(redis={"url": f"{down},{two[1]}"}), new_tasks(8))
    assert all(isinstance(o, Answered) for o in outcomes) and len(worker.tasks) == 8


def test_a_clients_rate_is_split_between_the_shards_and_refused_once_every_shard_refused(
    sharded, two, consumer
) -> None:
    for url in two:
        consumer(url=url)
    # a burst of 2 is 1 per shard: the second task finds its first shard's bucket empty and goes on
    first, second, third = dispatch(sharded(rate_limit=0.01, rate_burst=2), new_tasks(3))
    assert isinstance(first, Answered) and isinstance(second, Answered)
    assert isinstance(third, RateLimited) and third.retry_after_s >= 50


def test_a_clients_share_is_split_between_the_shards(sharded, two) -> None:
    """With a share of 2 (1 per shard), a client holding a task in each shard is refused by both."""
    for url in two:
        r = redis.Redis.from_url(url, decode_responses=True)
        r.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
        entry = str(r.xadd(keys.TASKS, {"task": "held"}))
        r.zadd(keys.client_tasks("ip:127.0.0.1"), {entry: 1})
    (outcome,) = dispatch(sharded(max_client_tasks=2, reply_timeout_s=0.2), new_tasks(1))
    assert isinstance(outcome, TooManyTasks) and "already has 2 tasks" in outcome.detail


def readiness(client: httpx.Client, workers: int) -> httpx.Response:
    """/readyz once the consumers started so far have sent their first heartbeat."""
    deadline = time.monotonic() + 5
    while (answer := client.get("/readyz")).json()["workers"] < workers and time.monotonic() < deadline:
        time.sleep(0.02)
    return answer


def test_readiness_and_metrics_see_every_shard(sharded, two, serve, consumer) -> None:
    client = serve(sharded())
    consumer(url=two[0])
    not_ready = readiness(client, workers=1)
    assert not_ready.status_code == 503
    assert not_ready.json()["shards"] == [{"redis": True, "workers": 1}, {"redis": True, "workers": 0}]
    consumer(url=two[1])
    ready = readiness(client, workers=2)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    text = client.get("/metrics").text
    assert 'quanta_workers{shard="0"} 1.0' in text and 'quanta_workers{shard="1"} 1.0' in text
    assert 'quanta_redis_up{shard="1"} 1.0' in text


def test_pages_by_reference_over_http_stay_in_their_shard(sharded, two, serve, consumer) -> None:
    workers = [consumer(url=url) for url in two]
    pages = follow(serve(sharded()), "watdiv", {"query": QUERY, "plan": "reference"})
    assert [p["stats"]["plan"] for p in pages] == ["reference", "reference", None]
    assert sorted(len(w.tasks) for w in workers) == [0, 3]


def test_settings_for_shards() -> None:
    urls = "redis://a:6379/0, redis://b:6380/1"
    assert [s.address() for s in RedisSettings(url=urls).shards()] == [("a", 6379), ("b", 6380)]
    with pytest.raises(SettingsError, match="one shard twice"):
        RedisSettings(url="redis://a:6379/0,redis://a:6379/0")
    with pytest.raises(SettingsError, match="SENTINELS"):
        RedisSettings(url=urls, sentinels="s:26379")
    with pytest.raises(SettingsError, match="scheme"):
        RedisSettings(url="redis://a:6379/0,http://b/")
    with pytest.raises(SettingsError, match="a worker serves one shard"):
        WorkerSettings.from_env({"QUANTA_REDIS_URL": urls})
