"""A worker stuck in a task is ended (by its stall recorder, a watchdog that needs no GIL), another
worker takes the task over, and a task that has stalled two workers is answered with an error
instead of a third."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from quanta.common import keys
from quanta.common.catalog import Dataset
from quanta.common.settings import SettingsError
from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql.errors import ErrorKind
from quanta.worker.config import WorkerSettings
from quanta.worker.stalls import STOP_SIGNAL

# One quantum of either (60 s here) reads a cross product that its FILTER empties, far past
# STALL_S: with a REGEX whose pattern has a back-reference (which the native evaluator leaves to
# it), the Python function decides the FILTER for every row (SIGALRM's handler can stop it
# there); with `= <IRI>`, natively, which holds the GIL and never looks at signals (only the
# stall recorder, another process, can end it).
PYTHON_STALL = r'SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(REGEX(STR(?r), "(z)\\1{40}")) }'
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
    assert stuck.wait(timeout=30) == -STOP_SIGNAL, "its stall recorder ends the process"
    stderr = stuck.stderr.read().decode()
    assert f"{STALLED_LINE} n1 held the worker 1.5 s" in stderr and "quanta/engine/" in stderr, stderr[-2000:]
    assert client.get(keys.stalls("n1")) == b"1", "counted before the end"
    start_worker("--reclaim-idle-ms", "300")  # the automatic limit (5 s), quanta of 5 ms: one quantum
    assert reply_within(client, task).HasField("page")


def test_a_task_that_killed_two_workers_is_answered_with_an_error_and_kills_no_third(
    server, start_worker, stalling
) -> None:
    client = redis.Redis.from_url(server.url)
    first = start_worker(*stalling)
    task = queue(client, "n2", NATIVE_STALL)
    assert first.wait(timeout=30) == -STOP_SIGNAL
    second = start_worker(*stalling)  # reclaims it (delivery 2), is stuck too
    assert second.wait(timeout=30) == -STOP_SIGNAL
    third = start_worker(*stalling)  # delivery 3: not run
    reply = reply_within(client, task)
    assert reply.error.kind == ErrorKind.DEAD_LETTER.slug and ErrorKind.DEAD_LETTER.status == 422
    assert "2 workers" in reply.error.message and f"stall limit of {STALL_S:g} s" in reply.error.message
    assert client.xlen(keys.DEAD_LETTERS) == 1
    assert client.xpending(keys.TASKS, keys.GROUP)["pending"] == 0
    small = queue(client, "n3", "SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    assert reply_within(client, small).page.results == 1, "the third worker serves on"
    assert third.poll() is None


STALLED_LINE = "Stalled: task"


def run_watched(url: str, block: str, after: str = "pass") -> subprocess.CompletedProcess[str]:
    """`block` under a watchdog of 0.5 s (both hands: a stall recorder on Redis at `url`), then
    `after`, in a process of its own."""
    code = (
        "import re, time\nfrom quanta.common.settings import RedisSettings\n"
        "from quanta.worker.runner import watchdog\nfrom quanta.worker.stalls import StallRecorder\n"
        f"recorder = StallRecorder(RedisSettings(url={url!r}), 0.5)\n"
        f"with watchdog(0.5, 't', recorder):\n    {block}\n{after}\nprint('done')"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_main_thread_stuck_in_c_holding_the_gil_is_counted_then_ended_by_the_second_hand(server) -> None:
    # a builtin that never looks at signals: SIGALRM's handler cannot run, the stall recorder can
    started = time.monotonic()
    stuck = run_watched(server.url, "sum(range(10**12))")
    took = time.monotonic() - started
    lines = stuck.stderr.splitlines()
    assert stuck.returncode == -STOP_SIGNAL, stuck.stderr
    assert lines[0] == "task t stalled its worker (stall 1 of the task)", "recorded first: " + stuck.stderr
    assert lines[1].startswith(f"{STALLED_LINE} t held the worker 1.5 s (the stall limit, 0.5 s, + 1 s)"), lines
    assert lines[2].startswith("Current thread 0x") and 'File "<string>", line 7' in lines[3], "the stuck line"
    assert redis.Redis.from_url(server.url).get(keys.stalls("t")) == b"1"
    assert took < 1.5 + 3, f"ended {took:.1f} s after the start (with the interpreter's start-up)"


def test_a_catastrophic_regex_in_re_is_stopped_by_the_first_hand(server) -> None:
    stopped = run_watched(server.url, "re.match(r'^(a+)+$', 'a' * 40 + '!')")  # `re` looks at signals
    assert stopped.returncode == 1 and "WorkerStalled: the task ran past the stall limit of 0.5 s" in stopped.stderr
    assert STALLED_LINE not in stopped.stderr and not redis.Redis.from_url(server.url).exists(keys.stalls("t"))


def test_a_block_that_ends_in_time_disarms_both_hands(server) -> None:
    quick = run_watched(server.url, "time.sleep(0.1)", after="time.sleep(2)")
    assert (quick.returncode, quick.stdout, quick.stderr) == (0, "done\n", "")
    assert not redis.Redis.from_url(server.url).exists(keys.stalls("t"))


def test_blocks_in_turn_are_watched_each_and_the_idle_time_between_them_is_not(server) -> None:
    """Many quick blocks (each an arm and a disarm of the shared page), idle gaps longer than the
    stall limit + the grace between them, then a stuck block: only that one is counted and ended."""
    block = "for i in range(2000):\n        pass\n    time.sleep(0.0005)"
    after = (
        "for n in range(3):\n    time.sleep(1.8)\n"
        "    for i in range(300):\n        with watchdog(0.5, f'q{n}-{i}', recorder):\n            pass\n"
        "print('idle and quick blocks lived', flush=True)\n"
        "with watchdog(0.5, 'last', recorder):\n    sum(range(10**12))"
    )
    code = run_watched(server.url, block, after=after)
    assert code.returncode == -STOP_SIGNAL, code.stderr
    assert code.stdout == "idle and quick blocks lived\n", code.stdout
    assert f"{STALLED_LINE} last held the worker 1.5 s" in code.stderr, code.stderr
    client = redis.Redis.from_url(server.url)
    assert client.get(keys.stalls("last")) == b"1" and client.keys(keys.stalls("*")) == [keys.stalls("last").encode()]


def test_a_worker_whose_stall_recorder_died_restarts_in_place_with_a_new_one(server, start_worker, stalling) -> None:
    client = redis.Redis.from_url(server.url)
    worker = start_worker(*stalling)
    (recorder,) = children(worker.pid)
    os.kill(recorder, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (now := children(worker.pid)) in ([], [recorder]):
        assert time.monotonic() < deadline, "no new recorder"
        time.sleep(0.05)
    assert worker.poll() is None, "the same process, restarted in place"
    task = queue(client, "r1", NATIVE_STALL)  # the new recorder is the second hand
    assert worker.wait(timeout=30) == -STOP_SIGNAL
    stderr = worker.stderr.read().decode()
    assert "the stall recorder is gone: the worker restarts in place" in stderr, stderr[-2000:]
    assert stderr.count('"msg": "worker serving"') == 2 and f"{STALLED_LINE} r1 held" in stderr, stderr[-2000:]
    assert client.get(keys.stalls(task.id)) == b"1" and now != [recorder]


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def pid_namespaces() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


@pytest.fixture
def start_pid_1(server) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start a worker as PID 1 of a PID namespace of its own (as in a container), once it beats."""
    if not pid_namespaces():
        pytest.skip("no PID namespaces here (`unshare --pid` needs CAP_SYS_ADMIN)")
    procs: list[subprocess.Popen[bytes]] = []

    def start(*flags: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "QUANTA_REDIS_URL": server.url}
        cmd = ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-m", "quanta.cli.main", "worker", *flags]
        procs.append(proc := subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        client = redis.Redis.from_url(server.url)
        deadline = time.monotonic() + 30
        while not client.zcard(keys.WORKERS):
            assert proc.poll() is None and time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        names: Any = client.zrange(keys.WORKERS, 0, -1)
        assert names[0].endswith(b"-1"), f"named after its pid, 1: {names}"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()  # unshare --kill-child: its PID 1 too
        proc.wait()


def test_a_worker_that_is_pid_1_stuck_in_native_code_is_ended_all_the_same(server, start_pid_1, stalling) -> None:
    """PID 1 ignores the signals it has no handler for, SIGKILL from its own namespace included: the
    worker runs under an init of its own, which ends as the worker did (128 + the signal)."""
    client = redis.Redis.from_url(server.url)
    worker = start_pid_1(*stalling)
    queue(client, "i1", NATIVE_STALL)
    assert worker.wait(timeout=30) == 128 + STOP_SIGNAL
    stderr = worker.stderr.read().decode()
    assert f"{STALLED_LINE} i1 held the worker 1.5 s" in stderr and "quanta/engine/" in stderr, stderr[-2000:]
    assert client.get(keys.stalls("i1")) == b"1"


def test_a_worker_that_is_pid_1_stops_on_sigterm_to_its_init(server, start_pid_1, stalling) -> None:
    client = redis.Redis.from_url(server.url)
    worker = start_pid_1(*stalling)
    (init,) = children(worker.pid)  # unshare's child: PID 1 inside
    os.kill(init, signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.stderr.read().decode()[-2000:]
    assert client.zcard(keys.WORKERS) == 0, "it left"


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
