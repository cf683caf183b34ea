"""A worker stuck in a task ends itself (a watchdog that needs no GIL), another worker takes the
task over, and a task that has stalled two workers is answered with an error instead of a third."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from quanta.common import keys
from quanta.common.catalog import Dataset
from quanta.common.settings import SettingsError
from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql.errors import ErrorKind
from quanta.worker.config import WorkerSettings

# One quantum of either (60 s here) reads a cross product that its FILTER empties, far past
# STALL_S: with UCASE() (which the native evaluator lacks), the FILTER runs in Python (SIGALRM's
# handler can stop it); with `= <IRI>`, inside the native chain, which holds the GIL and never looks
# at signals (only faulthandler can).
PYTHON_STALL = 'SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(UCASE(STR(?r)) = "NEVER") }'
NATIVE_STALL = "SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(?r = <http://example.org/never>) }"
STALL_S = 0.5


@pytest.fixture
def stalling(catalog: Path, tmp_path: Path) -> tuple[str, ...]:
    """Flags of a worker whose stall limit is below one quantum of the attacks (a later --catalog wins)."""
    long_quanta = tmp_path / "catalog.toml"
    data = catalog.parent / "watdiv-100k.hdt"
    long_quanta.write_text(f'[datasets.watdiv]\npath = "{data}"\nquantum_ms = 60000\nmax_results = 50\n')
    return ("--catalog", str(long_quanta), "--stall-s", str(STALL_S), "--reclaim-idle-ms", "300")


def queue(client: redis.Redis, task_id: str, query: str) -> q.Task:
    task = q.Task(id=task_id, dataset="watdiv", query=query, reply_to=keys.reply(task_id), enqueued_at=time.time())
    client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    return task


def reply_within(client: redis.Redis, task: q.Task, seconds: float = 60) -> q.Reply:
    """The task's reply, by short waits (redis-py's client times a read out after 5 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = client.blpop([task.reply_to], timeout=1)
        if answer is not None:
            reply = answer[1]
            assert isinstance(reply, bytes)  # a client without decode_responses
            return q.Reply.FromString(reply)
    raise AssertionError(f"no reply to {task.id} in {seconds} s")


def test_a_task_stalled_in_python_is_answered_422_and_its_worker_restarts_in_place(
    server, start_worker, stalling
) -> None:
    client = redis.Redis.from_url(server.url)
    worker = start_worker(*stalling)
    started = time.monotonic()
    reply = reply_within(client, queue(client, "p1", PYTHON_STALL))
    assert time.monotonic() - started < STALL_S + 5
    assert reply.error.kind == ErrorKind.STALLED.slug and ErrorKind.STALLED.status == 422
    assert f"stall limit of {STALL_S:g} s" in reply.error.message
    assert client.xpending(keys.TASKS, keys.GROUP)["pending"] == 0, "answered: nobody reclaims it"
    small = queue(client, "p2", "SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    assert reply_within(client, small).page.results == 1, "the same process serves on"
    assert worker.poll() is None
    worker.terminate()
    assert worker.wait(timeout=30) == 0
    stderr = worker.stderr.read().decode()
    assert "task p1 ran past the stall limit (0.5 s)" in stderr and "quanta/engine/" in stderr, stderr[-2000:]
    assert "restarts in place" in stderr and stderr.count('"msg": "worker serving"') == 2, stderr[-2000:]


def test_a_worker_stuck_in_native_code_is_ended_and_its_task_taken_over(server, start_worker, stalling) -> None:
    client = redis.Redis.from_url(server.url)
    stuck = start_worker(*stalling)
    task = queue(client, "n1", NATIVE_STALL)
    assert stuck.wait(timeout=30) == 1, "faulthandler's thread ends the process"
    stderr = stuck.stderr.read().decode()
    assert "Timeout (0:00:01.500000)!" in stderr and "quanta/engine/" in stderr, stderr[-2000:]
    start_worker("--reclaim-idle-ms", "300")  # the automatic limit (5 s), quanta of 5 ms: one quantum
    assert reply_within(client, task).HasField("page")


def test_a_task_that_killed_two_workers_is_answered_with_an_error_and_kills_no_third(
    server, start_worker, stalling
) -> None:
    client = redis.Redis.from_url(server.url)
    first = start_worker(*stalling)
    task = queue(client, "n2", NATIVE_STALL)
    assert first.wait(timeout=30) == 1
    second = start_worker(*stalling)  # reclaims it (delivery 2), is stuck too
    assert second.wait(timeout=30) == 1
    third = start_worker(*stalling)  # delivery 3: not run
    reply = reply_within(client, task)
    assert reply.error.kind == ErrorKind.DEAD_LETTER.slug and ErrorKind.DEAD_LETTER.status == 422
    assert "2 workers" in reply.error.message and f"stall limit of {STALL_S:g} s" in reply.error.message
    assert client.xlen(keys.DEAD_LETTERS) == 1
    assert client.xpending(keys.TASKS, keys.GROUP)["pending"] == 0
    small = queue(client, "n3", "SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    assert reply_within(client, small).page.results == 1, "the third worker serves on"
    assert third.poll() is None


def run_watched(block: str, after: str = "pass") -> subprocess.CompletedProcess[str]:
    """`block` under a watchdog of 0.5 s, then `after`, in a process of its own."""
    code = (
        "import re, time\nfrom quanta.worker.runner import watchdog\n"
        f"with watchdog(0.5, 't'):\n    {block}\n{after}\nprint('done')"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_main_thread_stuck_in_c_holding_the_gil_is_ended_by_the_second_hand() -> None:
    # a builtin that never looks at signals: SIGALRM's handler cannot run, faulthandler's thread can
    stuck = run_watched("sum(range(10**12))")
    assert stuck.returncode == 1 and stuck.stderr.startswith("Timeout (0:00:01.500000)!"), stuck.stderr
    assert 'File "<string>", line 4' in stuck.stderr, "the stuck line"


def test_a_catastrophic_regex_in_re_is_stopped_by_the_first_hand() -> None:
    stopped = run_watched("re.match(r'^(a+)+$', 'a' * 40 + '!')")  # `re` looks at signals
    assert stopped.returncode == 1 and "WorkerStalled: the task ran past the stall limit of 0.5 s" in stopped.stderr


def test_a_block_that_ends_in_time_disarms_both_hands() -> None:
    quick = run_watched("time.sleep(0.1)", after="time.sleep(2)")
    assert (quick.returncode, quick.stdout, quick.stderr) == (0, "done\n", "")


def dataset(quantum_ms: float) -> Dataset:
    return Dataset(name=f"d{quantum_ms}", path=Path("x.hdt"), quantum_ms=quantum_ms)


def test_the_stall_limit_and_what_follows_from_it() -> None:
    auto = WorkerSettings.from_env({})
    assert auto.stall_limit_s([dataset(75)]) == 5.0, "at least 5 s"
    assert auto.stall_limit_s([dataset(75), dataset(2000)]) == 20.0, "ten quanta of the slowest"
    assert auto.reclaim_after_ms([dataset(75)]) == 7000, "a stuck worker has been ended before its task is reclaimed"
    assert auto.heartbeat_stale_s([dataset(75)]) == 5.0 + 1.0 + 5.0 + 1.0 + 1.0
    assert auto.reclaim_after_ms([dataset(75), dataset(math.inf)]) == 600_000
    assert auto.heartbeat_stale_s([dataset(75), dataset(math.inf)]) is None, "an infinite quantum never beats"
    set_ = WorkerSettings.from_env({"QUANTA_WORKER_STALL_S": "2.5"})
    assert set_.stall_limit_s([dataset(75)]) == 2.5 and set_.reclaim_after_ms([dataset(75)]) == 4500
    off = WorkerSettings.from_env({"QUANTA_WORKER_STALL_S": "inf"})
    assert off.stall_limit_s([dataset(75)]) is None and off.reclaim_after_ms([dataset(75)]) == 1000
    assert off.heartbeat_stale_s([dataset(75)]) is None
    assert WorkerSettings.from_env({"QUANTA_RECLAIM_IDLE_MS": "700"}).reclaim_after_ms([dataset(75)]) == 700


@pytest.mark.parametrize("raw", ["-1", "nan", "soon"])
def test_a_bad_stall_limit_is_refused(raw: str) -> None:
    with pytest.raises(SettingsError, match="QUANTA_WORKER_STALL_S"):
        WorkerSettings.from_env({"QUANTA_WORKER_STALL_S": raw})
