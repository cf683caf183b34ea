"""A real redis-server, a catalog over a copy of the sample dataset, and
real `quanta worker` processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from quanta.common import keys
from quanta.common.redis_server import RedisServer, redis_server
from quanta.queue.v1 import queue_pb2 as q

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with redis_server() as s:
        yield s


@pytest.fixture(scope="session")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    shutil.copy(SAMPLE, folder / "watdiv-100k.hdt")
    path = folder / "catalog.toml"
    path.write_text(
        '[datasets.watdiv]\npath = "watdiv-100k.hdt"\nquantum_ms = 5\nmax_results = 50\n'
        '[datasets.tiny-plans]\npath = "watdiv-100k.hdt"\nquantum_ms = 5\nmax_results = 50\nplan_threshold_bytes = 10\n'
    )
    return path


@pytest.fixture
def start_worker(server: RedisServer, catalog: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(*extra: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "QUANTA_REDIS_URL": server.url}
        cmd = [sys.executable, "-m", "quanta.cli.main", "worker", "--catalog", str(catalog), *extra]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        client = redis.Redis.from_url(server.url)
        deadline = time.monotonic() + 30
        while client.zcard(keys.WORKERS) < len([p for p in procs if p.poll() is None]):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.05)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture
def submit() -> Callable[[redis.Redis, q.Task], q.Reply]:
    return submit_task


@pytest.fixture
def await_reply() -> Callable[[redis.Redis, q.Task], q.Reply]:
    return reply_to


def submit_task(client: redis.Redis, task: q.Task) -> q.Reply:
    """What the gateway does: queue the task, block on its reply."""
    task.id = task.id or uuid.uuid4().hex
    task.reply_to = keys.reply(task.id)
    task.enqueued_at = time.time()
    client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    return reply_to(client, task)


def reply_to(client: redis.Redis, task: q.Task) -> q.Reply:
    """The reply a worker pushes for `task`, waited for up to 30 s."""
    answer = client.blpop([task.reply_to], timeout=30)
    assert answer is not None, "no reply"
    reply = answer[1]
    assert isinstance(reply, bytes)  # a client without decode_responses
    return q.Reply.FromString(reply)
