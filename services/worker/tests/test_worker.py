"""The worker against a real Redis: pages, plans by value and by reference,
errors, reclaiming a dead worker's task, dead letters, SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from quanta.common import keys
from quanta.engine.storage import open_store
from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql import term_rows
from quanta.sparql.reader import read_json
from quanta.sparql.results import rows_text
from quanta.testkit.engine import run_paged
from quanta.worker.stalls import STOP_SIGNAL

LIKES = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }"


Submit = Callable[[redis.Redis, q.Task], q.Reply]


def run_to_end(
    submit: Submit, client: redis.Redis, dataset: str, query: str, mode: q.PlanMode = q.PLAN_MODE_AUTO
) -> tuple[list[dict[str, Any]], int]:
    rows: list[dict[str, Any]] = []
    reply = submit(client, q.Task(dataset=dataset, query=query, plan_mode=mode))
    pages = 1
    while True:
        assert reply.HasField("page"), reply.error.message
        rows += json.loads(reply.page.bindings_json)
        kind = reply.page.WhichOneof("next")
        if kind is None:
            return rows, pages
        follow = q.Task(dataset=dataset, plan_mode=mode)
        if kind == "plan":
            follow.plan = reply.page.plan
        else:
            follow.plan_ref = reply.page.plan_ref
        reply = submit(client, follow)
        pages += 1


def test_pages_by_value_and_by_reference_give_the_engine_answer(server, start_worker, catalog, submit) -> None:
    start_worker()
    client = redis.Redis.from_url(server.url)
    store = open_store(str(catalog.parent / "watdiv-100k.hdt"), name="watdiv")
    _, expected, _, _ = run_paged(store, LIKES, None)
    for dataset, mode in [
        ("watdiv", q.PLAN_MODE_VALUE),
        ("watdiv", q.PLAN_MODE_REFERENCE),
        ("tiny-plans", q.PLAN_MODE_AUTO),
    ]:
        rows, pages = run_to_end(submit, client, dataset, LIKES, mode)
        assert pages > 1
        got = sorted((b["s"]["value"], b["o"]["value"]) for b in rows)
        assert got == sorted(expected), (dataset, mode)
    assert client.keys(keys.plan("*")), "plans by reference are kept in Redis"
    assert all(0 < client.ttl(k) <= keys.PLAN_TTL_S for k in client.keys(keys.plan("*")))


def test_errors_are_replies(server, start_worker, submit) -> None:
    start_worker()
    client = redis.Redis.from_url(server.url)
    syntax = submit(client, q.Task(dataset="watdiv", query="SELECT * WHERE {\n ?s ?p }"))
    assert (syntax.error.kind, syntax.error.line) == ("syntax-error", 2)
    unsupported = submit(client, q.Task(dataset="watdiv", query="SELECT DISTINCT ?s WHERE { ?s ?p ?o }"))
    assert (unsupported.error.kind, unsupported.error.operator) == ("unsupported-operator", "DISTINCT")
    assert submit(client, q.Task(dataset="nope", query="ASK {}")).error.kind == "unknown-dataset"
    assert submit(client, q.Task(dataset="watdiv", plan_ref="gone")).error.kind == "plan-expired"
    assert submit(client, q.Task(dataset="watdiv", plan=b"\x01\x02")).error.kind == "invalid-plan"
    # a plan from one dataset is refused by another (another name: another dataset)
    first = submit(client, q.Task(dataset="watdiv", query=LIKES, plan_mode=q.PLAN_MODE_VALUE))
    other = submit(client, q.Task(dataset="tiny-plans", plan=first.page.plan))
    assert other.error.kind == "dataset-mismatch"
    assert client.xlen(keys.TASKS) == 0, "every task is acknowledged and removed"


def test_a_dead_workers_task_is_reclaimed(server, start_worker, await_reply) -> None:
    client = redis.Redis.from_url(server.url)
    client.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    task = q.Task(id="t1", dataset="watdiv", query=LIKES + " LIMIT 3", reply_to=keys.reply("t1"))
    client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    # a worker that took the task and died before replying
    assert client.xreadgroup(keys.GROUP, "ghost", {keys.TASKS: ">"}, count=1)
    start_worker("--reclaim-idle-ms", "200")
    assert await_reply(client, task).page.results == 3
    assert client.xpending(keys.TASKS, keys.GROUP)["pending"] == 0


def lose_deliveries(client: redis.Redis, task: q.Task, times: int) -> None:
    """Queue `task` and let `times` workers take it and never reply (ghosts: consumers with no process)."""
    client.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    entry = client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    client.xreadgroup(keys.GROUP, "ghost-1", {keys.TASKS: ">"}, count=1)
    for n in range(times - 1):
        client.xclaim(keys.TASKS, keys.GROUP, f"ghost-{n + 2}", min_idle_time=0, message_ids=[entry])


def test_a_task_whose_workers_keep_vanishing_is_dead_lettered(server, start_worker, await_reply) -> None:
    client = redis.Redis.from_url(server.url)
    task = q.Task(id="t2", dataset="watdiv", query="ASK {}", reply_to=keys.reply("t2"))
    lose_deliveries(client, task, keys.MAX_VANISHED)  # it crashed every worker that took it
    start_worker("--reclaim-idle-ms", "100")
    reply = await_reply(client, task)
    assert reply.error.kind == "dead-letter"
    assert f"{keys.MAX_VANISHED} workers in turn died" in reply.error.message, reply.error.message
    assert client.xlen(keys.DEAD_LETTERS) == 1
    assert client.xpending(keys.TASKS, keys.GROUP)["pending"] == 0


def test_a_task_that_stalled_two_workers_is_dead_lettered(server, start_worker, await_reply) -> None:
    """Two lost deliveries, both counted as stalls by the workers' stall recorders: set aside."""
    client = redis.Redis.from_url(server.url)
    task = q.Task(id="t4", dataset="watdiv", query="ASK {}", reply_to=keys.reply("t4"))
    lose_deliveries(client, task, keys.MAX_STALLS)
    client.set(keys.stalls("t4"), keys.MAX_STALLS)  # what the two recorders wrote
    start_worker("--reclaim-idle-ms", "100", "--stall-s", "5")
    reply = await_reply(client, task)
    assert reply.error.kind == "dead-letter"
    assert "2 workers in turn were stuck past the stall limit of 5 s" in reply.error.message, reply.error.message
    assert not client.exists(keys.stalls("t4")), "the count goes with the task"


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def holder(client: redis.Redis, entry: bytes | str) -> tuple[str, int] | None:
    """Which consumer holds the task pending, and how many times it was delivered."""
    pending: Any = client.xpending_range(keys.TASKS, keys.GROUP, min=entry, max=entry, count=1)
    return (pending[0]["consumer"].decode(), int(pending[0]["times_delivered"])) if pending else None


def kill_when_it_holds(client: redis.Redis, worker: subprocess.Popen[bytes], entry: bytes | str, delivery: int) -> None:
    """SIGKILL `worker` once it runs the task's `delivery`th delivery (a node lost, an eviction)."""
    deadline = time.monotonic() + 30
    while (held := holder(client, entry)) is None or held[1] < delivery:
        assert time.monotonic() < deadline, f"delivery {delivery} never taken: {held}"
        time.sleep(0.02)
    time.sleep(0.2)  # inside the task's long quantum
    recorders = children(worker.pid)
    worker.kill()
    worker.wait()
    for pid in recorders:  # the stall recorder ends with its worker's pipe
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text():
            assert time.monotonic() < deadline, "the stall recorder outlived its worker"
            time.sleep(0.05)


# One quantum of it (60 s in `long_quanta`) reads a cross product that its FILTER empties.
SLOW = 'SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(STR(?r) = "never") }'
NATIVE_STALL = "SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(?r = <http://example.org/never>) }"


@pytest.fixture
def long_quanta(catalog: Path, tmp_path: Path) -> str:
    """A catalog whose quanta run up to a minute (a later --catalog wins)."""
    path = tmp_path / "catalog.toml"
    path.write_text(f'[datasets.watdiv]\npath = "{catalog.parent / "watdiv-100k.hdt"}"\nquantum_ms = 60000\n')
    return str(path)


def test_a_task_whose_workers_were_killed_twice_runs_on_a_third(server, start_worker, long_quanta, await_reply) -> None:
    """Two workers SIGKILLed while they ran the task (nothing the task did: a node lost, an eviction)
    are not two strikes against it: the third worker runs it (before, the third delivery was
    dead-lettered, 422, whatever had ended the workers)."""
    client = redis.Redis.from_url(server.url)
    task = q.Task(id="k1", dataset="watdiv", query=SLOW, reply_to=keys.reply("k1"), enqueued_at=time.time())
    entry = client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    unlucky = ("--catalog", long_quanta, "--stall-s", "60", "--reclaim-idle-ms", "300")
    for delivery in (1, 2):
        kill_when_it_holds(client, start_worker(*unlucky), entry, delivery)
    start_worker("--reclaim-idle-ms", "300")  # quanta of 5 ms: its delivery 3 answers a page
    reply = await_reply(client, task)
    assert reply.HasField("page"), reply.error.message
    assert client.xlen(keys.DEAD_LETTERS) == 0 and not client.exists(keys.stalls("k1"))


def test_a_stall_and_a_vanished_worker_are_counted_apart(server, start_worker, long_quanta, await_reply) -> None:
    """One worker killed, one stalled in native code (its recorder counts it, then ends it): one
    strike of each, neither cap reached, so the third delivery runs."""
    client = redis.Redis.from_url(server.url)
    task = q.Task(id="k2", dataset="watdiv", query=NATIVE_STALL, reply_to=keys.reply("k2"), enqueued_at=time.time())
    entry = client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    kill_when_it_holds(client, start_worker("--catalog", long_quanta, "--stall-s", "60"), entry, 1)
    stuck = start_worker("--catalog", long_quanta, "--stall-s", "0.5", "--reclaim-idle-ms", "300")
    assert stuck.wait(timeout=30) == -STOP_SIGNAL, "its stall recorder ends it"
    assert client.get(keys.stalls("k2")) == b"1", "its recorder counted the stall first"
    start_worker("--reclaim-idle-ms", "300")
    reply = await_reply(client, task)
    assert reply.HasField("page"), reply.error.message
    assert not client.exists(keys.stalls("k2")), "the count goes with the task"


def test_sigterm_finishes_the_quantum_in_hand(server, start_worker, await_reply) -> None:
    worker = start_worker()
    client = redis.Redis.from_url(server.url)
    task = q.Task(id="t3", dataset="watdiv", query=LIKES, reply_to=keys.reply("t3"), enqueued_at=time.time())
    client.xadd(keys.TASKS, {"task": task.SerializeToString()})
    time.sleep(0.001)
    worker.send_signal(signal.SIGTERM)
    assert await_reply(client, task).HasField("page")
    assert worker.wait(timeout=10) == 0
    assert client.zcard(keys.WORKERS) == 0


def test_a_worker_stops_at_once_when_redis_went_first(server, start_worker) -> None:
    """As on Ctrl-C of `quanta up`, which stops Redis with the rest: the task loop has its own
    backoff, and redis-py's retries on top of it held a stopping worker for 7 to 10 s."""
    worker = start_worker()
    server.stop()
    time.sleep(0.3)  # the worker's blocking read has failed: it is retrying
    started = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    assert time.monotonic() - started < 2


def test_rows_as_terms_give_the_json_pages_solutions(server, start_worker, submit) -> None:
    """A task asking for rows as terms (ROW_FORMAT_TERMS) gets, page after page,
    the solutions the pre-rendered JSON pages have."""
    start_worker()
    client = redis.Redis.from_url(server.url)
    query = 'SELECT * WHERE { VALUES ?x { UNDEF "é \\"q\\"\\n" } ?s <http://schema.org/caption> ?o }'
    solutions: dict[int, list[tuple[str | None, ...]]] = {}
    for rows_format in (q.ROW_FORMAT_JSON, q.ROW_FORMAT_TERMS):
        task = q.Task(dataset="watdiv", query=query, plan_mode=q.PLAN_MODE_VALUE, rows=rows_format)
        got: list[tuple[str | None, ...]] = []
        pages = 0
        while True:
            pages += 1
            page = submit(client, task).page
            head = list(page.head)
            if rows_format == q.ROW_FORMAT_TERMS:
                assert not page.bindings_json
                rows = term_rows.decode(page.rows.terms, page.rows.cells, len(head), page.results)
                assert len(page.rows.terms) == len(set(page.rows.terms)), "each distinct term once"
            else:
                assert not page.rows.cells
                rows = read_json({"head": {"vars": head}, "results": {"bindings": json.loads(page.bindings_json)}}).rows
            assert len(rows) == page.results
            got += rows
            if page.WhichOneof("next") is None:
                break
            task = q.Task(dataset="watdiv", plan=page.plan, rows=rows_format)
        assert pages > 1  # max_results = 50
        solutions[rows_format] = sorted(got, key=repr)
    assert solutions[q.ROW_FORMAT_JSON] == solutions[q.ROW_FORMAT_TERMS]
    x = head.index("x")
    assert {row[x] for row in solutions[q.ROW_FORMAT_TERMS]} == {None, '"é "q"\n"'}  # unbound, and raw


def test_rows_in_a_results_format_with_chosen_columns(server, start_worker, submit) -> None:
    """ROW_FORMAT_TSV, _CSV, _XML: each page's rows as the Python writers write
    them, in the task's `columns` order (resumed pages too); a column the
    query lacks is an invalid request."""
    start_worker()
    client = redis.Redis.from_url(server.url)
    query = 'SELECT * WHERE { VALUES ?x { UNDEF "é \\"q\\"\\n" } ?s <http://schema.org/caption> ?o }'
    columns = ["o", "x", "s"]
    terms = q.Task(dataset="watdiv", query=query, plan_mode=q.PLAN_MODE_VALUE, rows=q.ROW_FORMAT_TERMS)
    expected = []
    while True:
        page = submit(client, terms).page
        head = list(page.head)
        at = [head.index(c) for c in columns]
        rows = term_rows.decode(page.rows.terms, page.rows.cells, len(head), page.results)
        expected += [tuple(row[i] for i in at) for row in rows]
        if page.WhichOneof("next") is None:
            break
        terms = q.Task(dataset="watdiv", plan=page.plan, rows=q.ROW_FORMAT_TERMS)
    for fmt, code in (("tsv", q.ROW_FORMAT_TSV), ("csv", q.ROW_FORMAT_CSV), ("xml", q.ROW_FORMAT_XML)):
        task = q.Task(dataset="watdiv", query=query, plan_mode=q.PLAN_MODE_VALUE, rows=code, columns=columns)
        text, pages = b"", 0
        while True:
            page = submit(client, task).page
            pages += 1
            assert list(page.head) == columns and not page.bindings_json and not page.rows.cells
            text += page.text
            if page.WhichOneof("next") is None:
                break
            task = q.Task(dataset="watdiv", plan=page.plan, rows=code, columns=columns)
        assert pages > 1
        assert text == rows_text(fmt, columns, expected).encode(), fmt
    wrong = submit(client, q.Task(dataset="watdiv", query=query, rows=q.ROW_FORMAT_TSV, columns=["o", "nowhere"]))
    assert wrong.error.kind == "invalid-request"
