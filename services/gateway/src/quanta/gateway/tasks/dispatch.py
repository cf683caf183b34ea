"""One round trip to the workers: admit and enqueue a Task, then block on its reply list.

The worker LPUSHes the serialized Reply to `Task.reply_to` (with a TTL) and
the gateway waits on it with BLPOP: no polling, and nothing to clean up
(popping the last element deletes the list). Both commands go through one
connection of the lean RESP pool (resp.py), the request's for its duration.

`Dispatcher.run` never raises for what the transport meets: it returns an
outcome, and each surface (the /v1 route, the SPARQL endpoint, the smart
client running in the gateway) decides what to make of it. `Answered` has
the page; every other outcome has the `kind` of error it amounts to, and
`kind.retryable` tells "send the same task again after `retry_after_s`"
(nothing is lost or repeated: a saved plan resumes the same state) from
"failed".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import ClassVar

from redis.exceptions import RedisError

from quanta.common import keys
from quanta.gateway import metrics
from quanta.gateway.config import Settings
from quanta.gateway.tasks.admission import MEMORY_FULL, Admission, Admitter, out_of_memory
from quanta.gateway.tasks.shards import Shard, Shards
from quanta.queue.v1 import queue_pb2
from quanta.sparql.errors import ErrorKind

log = logging.getLogger("quanta.gateway")
# Extra time a blocking read may take beyond its own timeout before the
# connection is presumed dead (a vanished peer never sends a FIN).
GUARD_S = 2.0


@dataclass(frozen=True, slots=True)
class Answered:
    """A worker ran the quantum: the page, and enqueue to reply as measured here."""

    page: queue_pb2.Page
    round_trip_ms: float


@dataclass(frozen=True, slots=True)
class Failed:
    """A worker answered with an error (a syntax error, an expired plan, ...): not retryable."""

    error: queue_pb2.Error

    @property
    def kind(self) -> ErrorKind:
        return ErrorKind.of(self.error.kind)

    @property
    def retry_after_s(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class RetryLater:
    """No page: send the same task again after `retry_after_s` (always safe: a
    saved plan resumed twice gives the same page twice)."""

    retry_after_s: int
    detail: str = ""  # the problem's detail: which limit
    kind: ClassVar[ErrorKind]


@dataclass(frozen=True, slots=True)
class RateLimited(RetryLater):
    """The client is over its rate: not admitted."""

    kind = ErrorKind.RATE_LIMITED


@dataclass(frozen=True, slots=True)
class TooManyTasks(RetryLater):
    """The client already holds its share of the queue (queued or running tasks): not admitted."""

    kind = ErrorKind.TOO_MANY_TASKS


@dataclass(frozen=True, slots=True)
class QueueFull(RetryLater):
    """The task stream holds its maximum, or Redis its maxmemory: not admitted."""

    kind = ErrorKind.QUEUE_FULL


@dataclass(frozen=True, slots=True)
class RedisDown(RetryLater):
    """Redis did not answer (refused, reset, or a command timed out): the task
    may not have been queued, or its reply was lost."""

    kind = ErrorKind.REDIS_UNAVAILABLE


@dataclass(frozen=True, slots=True)
class ReplyTimeout:
    """Admitted, but no reply within `timeout_s` (withdrawn if no worker took it
    yet). Send the same input again: it resumes from the state it carried."""

    timeout_s: float
    retry_after_s: int = 1
    kind: ClassVar[ErrorKind] = ErrorKind.REPLY_TIMEOUT


@dataclass(frozen=True, slots=True)
class WrongReply:
    """A reply for another task came back (a bug): internal."""

    retry_after_s: int = 0
    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL


Failure = Failed | RateLimited | TooManyTasks | QueueFull | RedisDown | ReplyTimeout | WrongReply
Outcome = Answered | Failure


# Which refusal a task refused by every shard is answered with: the client's own doing first (429,
# not 503: see admission.py), then the shortest wait.
REFUSALS = ("rate_limited", "too_many_tasks", "queue_full")


class Dispatcher:
    def __init__(
        self, shards: Shards, admitter: Admitter, *, command_timeout_s: float, reply_timeout_s: float,
        retry_after_s: int,
    ) -> None:  # fmt: skip
        self.shards, self.admitter = shards, admitter
        self.command_timeout_s, self.reply_timeout_s, self.retry_after_s = (
            command_timeout_s, reply_timeout_s, retry_after_s,
        )  # fmt: skip

    @classmethod
    def from_settings(cls, settings: Settings) -> Dispatcher:
        """The gateway's: over the shards QUANTA_REDIS_URL lists (close with `shards.aclose()`)."""
        shards = Shards(settings.redis)
        admitter = Admitter(
            settings.rate_limit, settings.rate_burst, settings.max_queue, settings.retry_after_s,
            client_tasks=settings.max_client_tasks, reserve=settings.queue_reserve, shards=len(shards),
        )  # fmt: skip
        return cls(
            shards, admitter, command_timeout_s=settings.redis.socket_timeout_s,
            reply_timeout_s=settings.reply_timeout_s, retry_after_s=settings.retry_after_s,
        )  # fmt: skip

    async def run(self, client: str, task: queue_pb2.Task, charge: bool = True, continuation: bool = False) -> Outcome:
        """Admit `task` for `client` (charged to its rate limit unless `charge` is
        False: a quantum of a query the SPARQL endpoint admitted; into the queue's reserve when it
        is a `continuation` of a running /sparql query), enqueue it, wait for its reply.

        A new task is offered to each shard in turn until one admits it; one that resumes a plan
        kept by reference goes to the shard that keeps it. `task` is filled in as sent: its reply
        list, its enqueue time, and its `plan_ref` without the shard's index (send a new task to retry)."""
        task.reply_to = keys.reply(task.id)
        task.enqueued_at = time.time()
        if task.WhichOneof("input") == "plan_ref":
            pinned = self.shards.pinned(task.plan_ref)
            if pinned is None:
                return Failed(queue_pb2.Error(kind=ErrorKind.PLAN_EXPIRED.slug, message=UNKNOWN_SHARD))
            shard, task.plan_ref = pinned
            candidates = [shard]
        else:
            candidates = self.shards.in_turn()
        payload = task.SerializeToString()
        started = time.perf_counter()
        refusals: list[Admission] = []
        for shard in candidates:
            admission = None
            try:
                async with shard.pool.connection() as conn:
                    async with asyncio.timeout(self.command_timeout_s):
                        admission = await self.admitter.admit(conn, client, payload, charge, continuation)
                    if admission.refused:
                        refusals.append(admission)
                        continue
                    async with asyncio.timeout(self.reply_timeout_s + GUARD_S):
                        item = await conn.call("BLPOP", task.reply_to, self.reply_timeout_s)
            except (RedisError, OSError, TimeoutError) as error:
                if admission is None and out_of_memory(error):  # refused before anything was queued: full, not down
                    full = Admission(refused="queue_full", retry_after_s=self.retry_after_s, detail=MEMORY_FULL)
                    refusals.append(full)
                    continue
                log.warning("redis unavailable", extra={"error": repr(error), "shard": shard.name})
                if admission is None:  # not queued there: another shard may take it
                    continue
                metrics.REJECTED.labels("redis_down").inc()
                return RedisDown(self.retry_after_s)
            return await self._answer(shard, task, admission.entry_id, item, started)
        if not refusals:
            metrics.REJECTED.labels("redis_down").inc()
            return RedisDown(self.retry_after_s)
        refused = min(refusals, key=lambda a: (REFUSALS.index(a.refused), a.retry_after_s))
        metrics.REJECTED.labels(refused.refused).inc()
        if refused.refused == "rate_limited":
            return RateLimited(refused.retry_after_s)
        if refused.refused == "too_many_tasks":
            share = self.admitter.client_tasks
            detail = f"this client already has {share} tasks queued or running; send more as they are answered"
            return TooManyTasks(refused.retry_after_s, detail)
        return QueueFull(refused.retry_after_s, refused.detail or self._full(continuation))

    async def _answer(
        self, shard: Shard, task: queue_pb2.Task, entry_id: str, item: list[bytes] | None, started: float
    ) -> Outcome:
        if item is None:
            metrics.REPLY_TIMEOUTS.inc()
            await self._withdraw(shard, entry_id)
            return ReplyTimeout(self.reply_timeout_s)
        reply = queue_pb2.Reply.FromString(item[1])
        if reply.id != task.id:
            log.error("reply for another task", extra={"task_id": task.id, "reply_id": reply.id})
            return WrongReply()
        if reply.WhichOneof("outcome") != "page":
            return Failed(reply.error)
        if reply.page.HasField("plan_ref"):
            reply.page.plan_ref = self.shards.plan_ref(shard, reply.page.plan_ref)
        return Answered(reply.page, (time.perf_counter() - started) * 1000)

    def _full(self, continuation: bool) -> str:
        reserved = self.admitter.reserved
        where = " of every shard" if len(self.shards) > 1 else ""
        if continuation or not reserved:
            return f"the queue{where} holds its maximum of {self.admitter.max_queue} tasks"
        bound = self.admitter.bound(continuation)
        return (
            f"the queue{where} holds {bound} tasks, its maximum for new work "
            f"({reserved} more are kept for running queries)"
        )

    async def _withdraw(self, shard: Shard, entry_id: str) -> None:
        """Drop a task nobody waits for any more, if no worker took it yet: under
        overload (the usual cause of a timeout) it would only add to the backlog."""
        with contextlib.suppress(RedisError, OSError):
            await shard.redis.xdel(keys.TASKS, entry_id)


UNKNOWN_SHARD = "the saved plan was kept by a shard of the queue this service does not have; run the query again"
