"""Plans kept by reference: one key per input however often it is replayed, and a reference
whose plan was replaced is refused, never resumed from another state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from quanta.common import keys, plans
from quanta.common.redis_server import RedisServer, redis_server
from quanta.queue.v1 import queue_pb2


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def client(server: RedisServer) -> redis.Redis:
    r = redis.Redis.from_url(server.url)
    r.flushdb()
    return r


def plan_keys(client: redis.Redis) -> int:
    return len(list(client.scan_iter(keys.plan("*"))))


def test_replays_of_one_input_keep_one_plan(client: redis.Redis) -> None:
    first = plans.keep(client, queue_pb2.Task(id="a", dataset="d", query="SELECT"), b"plan-1")
    replays = [queue_pb2.Task(id=f"replay-{i}", dataset="d", plan_ref=first) for i in range(50)]
    refs = {plans.keep(client, task, b"plan-2") for task in replays}
    assert len(refs) == 1 and plan_keys(client) == 2  # the task id does not matter for a resumed plan
    (ref,) = refs
    assert plans.load(client, ref) == b"plan-2" and plans.load(client, first) == b"plan-1"
    assert 0 < client.ttl(keys.plan(ref.partition(".")[0])) <= keys.PLAN_TTL_S


def test_a_replaced_plan_is_refused_never_swapped(client: redis.Redis) -> None:
    """Two runs of one input that stopped at different places: the later one's reference resumes,
    the earlier one's is refused (plan-expired) rather than resumed from the later state."""
    task = queue_pb2.Task(id="x", dataset="d", plan=b"state-0")
    earlier = plans.keep(client, task, b"stopped-at-10")
    later = plans.keep(client, task, b"stopped-at-12")
    assert earlier.partition(".")[0] == later.partition(".")[0]
    assert plans.load(client, later) == b"stopped-at-12"
    assert plans.load(client, earlier) is None
    assert plan_keys(client) == 1


def test_new_queries_and_other_inputs_have_keys_of_their_own(client: redis.Redis) -> None:
    refs = {
        plans.keep(client, queue_pb2.Task(id="q1", dataset="d", query="SELECT"), b"p"),
        plans.keep(client, queue_pb2.Task(id="q2", dataset="d", query="SELECT"), b"p"),
        plans.keep(client, queue_pb2.Task(id="v", dataset="d", plan=b"s"), b"p"),
        plans.keep(client, queue_pb2.Task(id="v", dataset="d", plan=b"s", graph="http://g"), b"p"),
        plans.keep(client, queue_pb2.Task(id="v", dataset="e", plan=b"s"), b"p"),
    }
    assert len(refs) == 5 and plan_keys(client) == 5


def test_references_of_the_previous_version_still_load(client: redis.Redis) -> None:
    client.set(keys.plan("legacy-random-ref"), b"kept", ex=60)
    assert plans.load(client, "legacy-random-ref") == b"kept"
    assert plans.load(client, "expired-ref") is None
