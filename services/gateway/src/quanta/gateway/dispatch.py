"""One round trip to the workers: admit and enqueue a Task, then block on its reply list.

The worker LPUSHes the serialized Reply to `Task.reply_to` (with a TTL) and
the gateway waits on it with BLPOP: no polling, and nothing to clean up
(popping the last element deletes the list). Both commands go through one
connection of the lean RESP pool (resp.py), the request's for its duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

from quanta.common import keys
from quanta.gateway import metrics
from quanta.gateway.admission import Admitter
from quanta.gateway.problems import Problem
from quanta.gateway.resp import RespPool
from quanta.queue.v1 import queue_pb2

log = logging.getLogger("quanta.gateway")
# Extra time a blocking read may take beyond its own timeout before the
# connection is presumed dead (a vanished peer never sends a FIN).
GUARD_S = 2.0


class Dispatcher:
    def __init__(
        self, redis: Redis, pool: RespPool, admitter: Admitter, *,
        command_timeout_s: float, reply_timeout_s: float, retry_after_s: int,
    ) -> None:  # fmt: skip
        self.redis, self.pool, self.admitter = redis, pool, admitter
        self.command_timeout_s, self.reply_timeout_s, self.retry_after_s = (
            command_timeout_s, reply_timeout_s, retry_after_s,
        )  # fmt: skip

    def _redis_down(self, error: BaseException) -> Problem:
        metrics.REJECTED.labels("redis_down").inc()
        log.warning("redis unavailable", extra={"error": repr(error)})
        return Problem(
            "redis-unavailable",
            "the task queue cannot be reached; retry the same request",
            headers={"Retry-After": str(self.retry_after_s)},
            retry_after=self.retry_after_s,
        )

    async def run(self, client: str, task: queue_pb2.Task) -> queue_pb2.Reply | None:
        """The worker's reply, or None when none came within the reply timeout."""
        task.reply_to = keys.reply(task.id)
        task.enqueued_at = time.time()
        item = None
        try:
            async with self.pool.connection() as conn:
                async with asyncio.timeout(self.command_timeout_s):
                    admission = await self.admitter.admit(conn, client, task.SerializeToString())
                if not admission.refused:
                    async with asyncio.timeout(self.reply_timeout_s + GUARD_S):
                        item = await conn.call("BLPOP", task.reply_to, self.reply_timeout_s)
        except (RedisError, OSError, TimeoutError) as error:
            raise self._redis_down(error) from error
        if admission.refused:
            metrics.REJECTED.labels(admission.refused).inc()
            slug = "rate-limited" if admission.refused == "rate_limited" else "queue-full"
            raise Problem(
                slug, headers={"Retry-After": str(admission.retry_after_s)}, retry_after=admission.retry_after_s
            )
        if item is None:
            await self._withdraw(admission.entry_id)
            return None
        reply = queue_pb2.Reply.FromString(item[1])
        if reply.id != task.id:
            log.error("reply for another task", extra={"task_id": task.id, "reply_id": reply.id})
            raise Problem("internal", "a worker answered with another task's reply")
        return reply

    async def _withdraw(self, entry_id: str) -> None:
        """Drop a task nobody waits for any more, if no worker took it yet: under
        overload (the usual cause of a timeout) it would only add to the backlog."""
        with contextlib.suppress(RedisError, OSError):
            await self.redis.xdel(keys.TASKS, entry_id)
