"""Fair use on the SPARQL endpoint, without time limits: per client, a cap on
the queries running at once and a token bucket for starting new ones.

A query is charged once, when it is admitted; its quanta then go through the
queue uncharged (a long query must not throttle itself). The count of running
queries is a sorted set of leases in Redis (the client's home shard, tasks/shards.py), shared by
every gateway process:
admitted queries renew their lease while they stream and drop it when they
end, and a gateway that dies leaves leases that run out by themselves.
Commands go through the lean RESP pool (tasks/resp.py), as the query route's do;
with neither a cap nor a rate (both 0), nothing is asked of Redis at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from typing import Any

from redis.exceptions import RedisError

from quanta.common import keys
from quanta.gateway import metrics
from quanta.gateway.problems import Problem
from quanta.gateway.tasks import token_bucket
from quanta.gateway.tasks.admission import MEMORY_FULL, QUERY_CLIENT, QUERY_TASKS, QueryTasks, out_of_memory
from quanta.gateway.tasks.resp import run_script
from quanta.gateway.tasks.shards import Shards
from quanta.sparql.errors import ErrorKind

log = logging.getLogger("quanta.gateway")
LEASE_S = 60.0  # a dead gateway's queries stop counting after this long
RENEW_S = LEASE_S / 3

# KEYS[1] the client's running queries, KEYS[2] its bucket of new queries.
# ARGV: max running (0: no cap), rate (0: none), burst, query id, lease ms.
# Returns {0, 0} admitted | {1, 0} too many running | {2, retry after ms} rate limited.
ADMIT_LUA, ADMIT_SHA = token_bucket.script("""
local now = now_ms()
local lease = tonumber(ARGV[5])
local cap = tonumber(ARGV[1])
-- Leases still running; the ended ones are dropped after the first write (ZADD, HSET), which Redis
-- refuses at its maxmemory: once a script has written, Redis lets it finish.
if cap > 0 and redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') >= cap then return {1, 0} end
local rate = tonumber(ARGV[2])
if rate > 0 then
  local wait = take_token(KEYS[2], now, rate, tonumber(ARGV[3]))
  if wait > 0 then return {2, wait} end
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], lease)
return {0, 0}
""")
# KEYS[1] the client's running queries; ARGV: query id, lease ms. Renews a lease still held.
RENEW_LUA, RENEW_SHA = token_bucket.script("""
if redis.call('ZADD', KEYS[1], 'XX', 'CH', now_ms() + tonumber(ARGV[2]), ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return 0
""")


class Lease:
    """An admitted query's place among its client's running queries, renewed
    in the background until `release`."""

    def __init__(self, fair_use: FairUse, client: str, query_id: str) -> None:
        self.fair_use, self.client, self.query_id = fair_use, client, query_id
        self.key = keys.running(client)
        self._renewing = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(RENEW_S)
            try:
                lease_ms = int(LEASE_S * 1000)
                await self.fair_use.call(self.client, RENEW_SHA, RENEW_LUA, [self.key], [self.query_id, lease_ms])
            except (RedisError, OSError, TimeoutError) as error:  # the next may succeed: a lease outlives a few misses
                log.warning("query lease not renewed", extra={"error": repr(error)})

    async def release(self) -> None:
        self._renewing.cancel()
        with contextlib.suppress(RedisError, OSError, TimeoutError):  # else the lease runs out by itself
            await self.fair_use.call(self.client, None, "ZREM", [self.key], [self.query_id])


class Unlimited:
    """The lease of a query when there is neither a cap nor a rate: nothing to count."""

    async def release(self) -> None:
        pass


class FairUse:
    def __init__(
        self, shards: Shards, *, max_queries: int, rate: float, burst: int, retry_after_s: int, timeout_s: float,
    ) -> None:  # fmt: skip
        self.shards, self.timeout_s = shards, timeout_s
        self.max_queries, self.rate, self.burst, self.retry_after_s = max_queries, rate, burst, retry_after_s

    async def call(self, client: str, sha: str | None, script: str, keys: list[str], args: list[Any]) -> Any:
        """A script (by its `sha`), or a plain command (`sha` None: `script` is its name), within the
        timeout, in `client`'s home shard."""
        async with self.shards.home(client).pool.connection() as conn, asyncio.timeout(self.timeout_s):
            if sha is None:
                return await conn.call(script, *keys, *args)
            return await run_script(conn, sha, script, keys, args)

    async def admit(self, client: str) -> Lease | Unlimited:
        """A lease for a new query of `client`; raises Problem 429 (too many
        running, or starting them too fast) or 503 (Redis unreachable, or at its
        maxmemory). The query's quanta count against `client`'s share of the queue
        (QUERY_CLIENT, read by the transport in this request's context)."""
        QUERY_CLIENT.set(client)
        QUERY_TASKS.set(QueryTasks())
        if not self.max_queries and not self.rate:
            return Unlimited()
        query_id = uuid.uuid4().hex
        args: list[int | float | str] = [self.max_queries, self.rate, self.burst, query_id, int(LEASE_S * 1000)]
        try:
            script_keys = [keys.running(client), keys.query_rate(client)]
            code, value = await self.call(client, ADMIT_SHA, ADMIT_LUA, script_keys, args)
        except (RedisError, OSError, TimeoutError) as error:
            full = out_of_memory(error)
            metrics.REJECTED.labels("queue_full" if full else "redis_down").inc()
            kind, detail = (
                (ErrorKind.QUEUE_FULL, MEMORY_FULL) if full
                else (ErrorKind.REDIS_UNAVAILABLE, "the task queue cannot be reached; retry the same request")
            )  # fmt: skip
            raise Problem(
                kind, detail, headers={"Retry-After": str(self.retry_after_s)}, retry_after=self.retry_after_s
            ) from error
        if code == 1:
            metrics.REJECTED.labels("too_many_queries").inc()
            detail = f"this client already runs {self.max_queries} queries; start another when one ends"
            raise Problem(
                ErrorKind.TOO_MANY_QUERIES, detail,
                headers={"Retry-After": str(self.retry_after_s)}, retry_after=self.retry_after_s,
            )  # fmt: skip
        if code == 2:
            metrics.REJECTED.labels("query_rate").inc()
            wait = max(1, math.ceil(int(value) / 1000))
            raise Problem(
                ErrorKind.RATE_LIMITED, f"this client starts queries faster than {self.rate:g}/s",
                headers={"Retry-After": str(wait)}, retry_after=wait,
            )  # fmt: skip
        return Lease(self, client, query_id)
