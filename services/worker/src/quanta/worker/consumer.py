"""The task loop: XREADGROUP a task, run it, push the reply and XACK (in one transaction).

A task stays pending until its reply is written, so a task whose worker
died (or was stuck, and was ended by the runner's watchdog) is reclaimed
(XAUTOCLAIM) by another worker after `reclaim_idle_ms` and run again: safe,
since the data is read-only and a task carries all its input. A task that
already stalled MAX_STALLS workers (counted by their stall recorders), or
whose workers vanished MAX_VANISHED times without a stall (crashed, killed),
is not run again: it goes to the dead-letter stream and its client gets an
error naming what happened.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import redis

from quanta.common import keys
from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql.errors import ErrorKind
from quanta.worker import metrics
from quanta.worker.config import HEARTBEAT_S
from quanta.worker.health import Health
from quanta.worker.runner import Runner, WorkerStalled, error

log = logging.getLogger("quanta.worker")

Entry = tuple[bytes, dict[bytes, bytes]]  # a task's stream entry: id, fields

RECLAIM_EVERY_S = 0.5


class Consumer:
    def __init__(
        self, client: redis.Redis, runner: Runner, name: str, *, reclaim_idle_ms: int, block_ms: int = 1000,
        health: Health | None = None,
    ):  # fmt: skip
        self.redis = client
        self.runner = runner
        self.name = name
        self.reclaim_idle_ms = reclaim_idle_ms
        self.block_ms = block_ms
        self.stopping = False
        # a task ran past the stall limit, or the stall recorder is gone: the worker restarts in place
        # (after answering the task in hand)
        self.restart = False
        self.health = health or Health(liveness_timeout_s=float("inf"))
        self._beat = 0.0
        self._reclaimed = 0.0

    def stop(self) -> None:
        """Finish the task in hand, reply, stop reading (SIGTERM)."""
        self.stopping = True

    def serve(self) -> None:
        backoff = 0.1
        ahead: list[Entry] = []  # the next task, read in the round trip that wrote the last reply
        while not self.stopping or ahead:  # a task read ahead is in hand: finish it before stopping
            try:
                self.heartbeat()
                entries, ahead = ahead or self.reclaim() or self.read(), []
                for i, (entry_id, fields) in enumerate(entries):
                    self.health.record(redis_ok=True)
                    ahead = self.handle(entry_id, fields, read_next=i == len(entries) - 1)
                self.health.record(redis_ok=True)
                backoff = 0.1
            except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.OutOfMemoryError) as e:
                # Out of memory: Redis at its maxmemory refuses writes (noeviction) until replies and
                # plans expire; like an outage, wait it out rather than crash-loop.
                ahead = []  # if it was read, it stays pending: reclaimed after reclaim_idle_ms
                self.health.record(redis_ok=False)
                log.warning("redis unavailable (%s); retrying in %.1fs", e, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except redis.ResponseError as e:
                if "NOGROUP" not in str(e):
                    raise
                self.ensure_group()  # Redis restarted empty: recreate the stream and group
        if self.restart:  # it restarts in place: still this worker, back in a moment (`quanta up` waits)
            with contextlib.suppress(redis.RedisError):
                self.redis.zadd(keys.WORKERS, {self.name: time.time()})
        else:
            self.leave()

    def ensure_group(self) -> None:
        try:
            self.redis.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise

    def heartbeat(self) -> None:
        now = time.time()
        if now - self._beat >= HEARTBEAT_S:
            self.redis.zadd(keys.WORKERS, {self.name: now})
            self._beat = now
            recorder = self.runner.recorder
            if recorder is not None and not self.restart and not recorder.alive():
                # the watchdog's second hand is gone: a fresh process gets a new one
                log.error("the stall recorder is gone: the worker restarts in place")
                self.restart = self.stopping = self.health.stopping = True

    def leave(self) -> None:
        with contextlib.suppress(redis.RedisError):
            self.redis.zrem(keys.WORKERS, self.name)

    def read(self) -> list[Entry]:
        """The next task for this worker, waiting up to block_ms."""
        return _entries(self._xreadgroup(self.redis))

    def _xreadgroup(self, client: Any) -> Any:  # the client, or a pipeline to queue the command on
        return client.xreadgroup(keys.GROUP, self.name, {keys.TASKS: ">"}, count=1, block=self.block_ms)

    def reclaim_due(self) -> bool:
        return time.monotonic() - self._reclaimed >= RECLAIM_EVERY_S

    def reclaim(self) -> list[Entry]:
        """Take over one task idle for too long (its worker died)."""
        if not self.reclaim_due():
            return []
        self._reclaimed = time.monotonic()
        reclaimed: Any = self.redis.xautoclaim(
            keys.TASKS, keys.GROUP, self.name, min_idle_time=self.reclaim_idle_ms, start_id="0-0", count=1
        )
        _, claimed, *_ = reclaimed
        taken = []
        for entry_id, fields in claimed:
            if fields is None:  # deleted meanwhile
                continue
            metrics.RECLAIMED.inc()
            pending: Any = self.redis.xpending_range(keys.TASKS, keys.GROUP, min=entry_id, max=entry_id, count=1)
            deliveries = int(pending[0]["times_delivered"]) if pending else 1
            task_id = q.Task.FromString(fields[b"task"]).id
            lost = deliveries - 1  # every earlier delivery: none was answered
            stalled = min(lost, int(self.redis.get(keys.stalls(task_id)) or 0)) if task_id else 0
            if stalled >= keys.MAX_STALLS or lost - stalled >= keys.MAX_VANISHED:
                self.dead_letter(entry_id, fields, stalled, lost - stalled)
            else:
                log.warning(
                    "reclaimed task %s (delivery %d: %d stalled, %d vanished)",
                    entry_id.decode(), deliveries, stalled, lost - stalled,
                )  # fmt: skip
                taken.append((entry_id, fields))
        return taken

    def handle(self, entry_id: bytes, fields: dict[bytes, bytes], read_next: bool = False) -> list[Entry]:
        """Run a task and reply; with `read_next`, the next task comes back with the reply's round
        trip (unless the worker is stopping or a reclaim is due, which go before a new task)."""
        task = q.Task.FromString(fields[b"task"])
        started = time.time()
        try:
            reply, page = self.runner.run(task)
        except WorkerStalled as e:
            # the query's doing: answer it, then give way to a fresh process (what the exception
            # interrupted may have left caches or pools half-updated)
            message = f"one quantum of this query ran past the workers' stall limit of {e.seconds:g} s"
            reply, page = error(task, ErrorKind.STALLED, message), None
            self.restart = self.stopping = self.health.stopping = True
        except Exception:  # a bug, not a bad task: answer rather than crash-loop
            log.exception("task %s failed", task.id)
            reply, page = error(task, ErrorKind.INTERNAL, "the worker failed on this task"), None
        read_next = read_next and not self.stopping and not self.reclaim_due()
        ahead = self.finish(entry_id, task, reply, read_next)  # the client is waiting: bookkeeping comes after
        if page is not None:
            metrics.observe(task.dataset, page, max(0.0, started - task.enqueued_at) if task.enqueued_at else 0.0)
        outcome = reply.error.kind if reply.HasField("error") else "page"
        metrics.TASKS.labels(task.dataset, outcome).inc()
        return ahead

    def finish(self, entry_id: bytes, task: q.Task, reply: q.Reply, read_next: bool = False) -> list[Entry]:
        """Reply, then acknowledge and delete the task, in one transaction (MULTI/EXEC), so a task
        is either answered and gone or still pending for another worker. A transaction rather
        than a Lua script: a script copies its arguments twice, which for a page of a megabyte
        tripled Redis's work. With `read_next`, the next task is read in the same round trip
        (inside a transaction XREADGROUP does not block: with none waiting, the loop reads again)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.lpush(task.reply_to, reply.SerializeToString())
        pipe.expire(task.reply_to, keys.REPLY_TTL_S)
        pipe.xack(keys.TASKS, keys.GROUP, entry_id)
        pipe.xdel(keys.TASKS, entry_id)
        if task.id:
            pipe.delete(keys.stalls(task.id))  # a watched block ended late (on a busy machine) may have left one
        if read_next:
            self._xreadgroup(pipe)
        answers = pipe.execute()
        return _entries(answers[-1]) if read_next else []  # the last command's: XREADGROUP

    def dead_letter(self, entry_id: bytes, fields: dict[bytes, bytes], stalled: int, vanished: int) -> None:
        task = q.Task.FromString(fields[b"task"])
        log.error("task %s stalled %d workers, %d vanished: dead-lettered", task.id, stalled, vanished)
        metrics.DEAD_LETTERS.inc()
        self.redis.xadd(
            keys.DEAD_LETTERS,
            {"task": fields[b"task"], "stalled": stalled, "vanished": vanished, "worker": self.name},
            maxlen=keys.DEAD_LETTERS_MAXLEN,
            approximate=True,
        )
        if stalled >= keys.MAX_STALLS:
            stall = self.runner.stall_s
            limit = f" of {stall:g} s" if stall is not None else ""
            what = f"{stalled} workers in turn were stuck past the stall limit{limit} running this query"
        else:
            what = f"{vanished} workers in turn died running this query (crashed, or were killed)"
        message = f"{what}: it is not run again"
        self.finish(entry_id, task, error(task, ErrorKind.DEAD_LETTER, message))


def _entries(answer: Any) -> list[Entry]:
    """XREADGROUP's answer (one stream) as its entries."""
    return answer[0][1] if answer else []
