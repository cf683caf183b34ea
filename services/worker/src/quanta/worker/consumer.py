"""The task loop: XREADGROUP a task, run it, push the reply and XACK (in one script).

A task stays pending until its reply is written, so a task whose worker
died is reclaimed (XAUTOCLAIM) by another worker after `reclaim_idle_ms`
and run again: safe, since the data is read-only and a task carries all its
input. A task delivered MAX_DELIVERIES times (it kills its workers) goes to
the dead-letter stream and its client gets an error.
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
from quanta.worker.health import Health
from quanta.worker.runner import Runner, error

log = logging.getLogger("quanta.worker")

HEARTBEAT_S = 1.0
RECLAIM_EVERY_S = 0.5

# Reply, then acknowledge and delete the task: one command, and atomic, so a
# task is either answered and gone or still pending for another worker.
# KEYS: reply list, task stream. ARGV: reply, reply TTL, group, entry id.
FINISH_LUA = """
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('XACK', KEYS[2], ARGV[3], ARGV[4])
redis.call('XDEL', KEYS[2], ARGV[4])
"""


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
        self.health = health or Health(liveness_timeout_s=float("inf"))
        self._beat = 0.0
        self._reclaimed = 0.0
        self._finish = client.register_script(FINISH_LUA)

    def stop(self) -> None:
        """Finish the task in hand, reply, stop reading (SIGTERM)."""
        self.stopping = True

    def serve(self) -> None:
        backoff = 0.1
        while not self.stopping:
            try:
                self.heartbeat()
                for entry_id, fields in self.reclaim() or self.read():
                    self.health.record(redis_ok=True)
                    self.handle(entry_id, fields)
                self.health.record(redis_ok=True)
                backoff = 0.1
            except redis.ResponseError as e:
                if "NOGROUP" not in str(e):
                    raise
                self.ensure_group()  # Redis restarted empty: recreate the stream and group
            except (redis.ConnectionError, redis.TimeoutError) as e:
                self.health.record(redis_ok=False)
                log.warning("redis unavailable (%s); retrying in %.1fs", e, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
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

    def leave(self) -> None:
        with contextlib.suppress(redis.RedisError):
            self.redis.zrem(keys.WORKERS, self.name)

    def read(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        answer: Any = self.redis.xreadgroup(keys.GROUP, self.name, {keys.TASKS: ">"}, count=1, block=self.block_ms)
        return answer[0][1] if answer else []

    def reclaim(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Take over one task idle for too long (its worker died)."""
        now = time.monotonic()
        if now - self._reclaimed < RECLAIM_EVERY_S:
            return []
        self._reclaimed = now
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
            if deliveries > keys.MAX_DELIVERIES:
                self.dead_letter(entry_id, fields, deliveries)
            else:
                log.warning("reclaimed task %s (delivery %d)", entry_id.decode(), deliveries)
                taken.append((entry_id, fields))
        return taken

    def handle(self, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        task = q.Task.FromString(fields[b"task"])
        started = time.time()
        try:
            reply, page = self.runner.run(task)
        except Exception:  # a bug, not a bad task: answer rather than crash-loop
            log.exception("task %s failed", task.id)
            reply, page = error(task, ErrorKind.INTERNAL, "the worker failed on this task"), None
        self.finish(entry_id, task, reply)  # the client is waiting: bookkeeping comes after
        if page is not None:
            metrics.observe(task.dataset, page, max(0.0, started - task.enqueued_at) if task.enqueued_at else 0.0)
        outcome = reply.error.kind if reply.HasField("error") else "page"
        metrics.TASKS.labels(task.dataset, outcome).inc()

    def finish(self, entry_id: bytes, task: q.Task, reply: q.Reply) -> None:
        """Write the reply and acknowledge the task, atomically (FINISH_LUA)."""
        self._finish(
            keys=[task.reply_to, keys.TASKS], args=[reply.SerializeToString(), keys.REPLY_TTL_S, keys.GROUP, entry_id]
        )

    def dead_letter(self, entry_id: bytes, fields: dict[bytes, bytes], deliveries: int) -> None:
        task = q.Task.FromString(fields[b"task"])
        log.error("task %s failed %d times: dead-lettered", task.id, deliveries)
        metrics.DEAD_LETTERS.inc()
        self.redis.xadd(
            keys.DEAD_LETTERS,
            {"task": fields[b"task"], "deliveries": deliveries, "worker": self.name},
            maxlen=keys.DEAD_LETTERS_MAXLEN,
            approximate=True,
        )
        message = f"the task failed on {deliveries} workers and was set aside"
        self.finish(entry_id, task, error(task, ErrorKind.DEAD_LETTER, message))
