"""Admission: a per-client token bucket, a per-client share of the queue and a bounded queue,
checked and enqueued in one Lua script.

One script means one round trip and no race between "is there room" and
"enqueue": many gateway processes can share the bounds. Rate first, then the
client's share, then the queue, so a client flooding a full queue is told it
is the one flooding (429, not 503).

The share counts every task of the client still in the stream (queued, or
taken by a worker and not yet answered), continuations included: they are
not charged to the rate (a long query must not throttle itself), so without
the share one client replaying a `next` token could fill the whole queue.
The script keeps the client's entry ids in a sorted set and, only when the
set is at the share, drops those no longer in the stream (a worker deletes a
task when it replies, the gateway when it gives up on it): nothing to
release, so a gateway that dies leaks nothing.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache

from redis.exceptions import ResponseError
from starlette.requests import Request

from quanta.common import keys
from quanta.gateway.config import Settings
from quanta.gateway.tasks import token_bucket
from quanta.gateway.tasks.resp import RespConnection, run_script

# KEYS[1] the client's bucket (hash: tokens, ts in ms), KEYS[2] the task stream, KEYS[3] the
# client's tasks (sorted set: entry id by admission time, ms).
# ARGV: rate (tokens/s, 0: no limit), burst, max queue, group, task bytes, client share (0: none),
# how long the client's set outlives its last task (ms).
# Returns {0, entry id} | {1, retry after ms} (rate limited) | {2, depth} (queue full) |
# {3, held} (the client holds its share).
# The clock is Redis's (token_bucket.now_ms).
ADMIT_LUA, ADMIT_SHA = token_bucket.script("""
local now = now_ms()
local rate = tonumber(ARGV[1])
if rate > 0 then
  local wait = take_token(KEYS[1], now, rate, tonumber(ARGV[2]))
  if wait > 0 then return {1, wait} end
end
local share = tonumber(ARGV[6])
local gone = {}
if share > 0 then
  local held = redis.call('ZCARD', KEYS[3])
  if held >= share then
    -- Oldest first: the likeliest to be answered already.
    for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
      if #redis.call('XRANGE', KEYS[2], id, id) == 0 then
        gone[#gone + 1] = id
        held = held - 1
        if held < share then break end
      end
    end
    if held >= share then return {3, held} end
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  -- A new (or restarted, empty) Redis: make the group read from the start, so
  -- tasks queued before any worker asked are still delivered.
  redis.call('XGROUP', 'CREATE', KEYS[2], ARGV[4], '0', 'MKSTREAM')
else
  local depth = redis.call('XLEN', KEYS[2])
  if depth >= tonumber(ARGV[3]) then return {2, depth} end
end
-- Writes that Redis refuses at its maxmemory (XADD, ZADD, HSET) come before any other: once a
-- script has written, Redis lets it finish, so a ZREM first would let XADD past the limit.
local id = redis.call('XADD', KEYS[2], '*', 'task', ARGV[5])
if share > 0 then
  if #gone > 0 then redis.call('ZREM', KEYS[3], unpack(gone)) end
  redis.call('ZADD', KEYS[3], now, id)
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[7]))
end
return {0, id}
""")
# A client's set of tasks outlives its last admission by this much: longer than any task waits.
HOLD_MS = 10 * 60 * 1000
# The client a /sparql request's quanta count against (set when fair_use admits its query; the
# smart client's tasks, streamed from the same request, inherit the context).
QUERY_CLIENT: ContextVar[str] = ContextVar("quanta_query_client", default="sparql-endpoint")


class QueryTasks:
    """A /sparql query's tasks so far (set when fair_use admits it; counted by the transport). Its
    first task starts a query like any other; the later ones continue an answer that may be
    streaming already, where a refusal would cut it: they may use the queue's reserve."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = 0


QUERY_TASKS: ContextVar[QueryTasks | None] = ContextVar("quanta_query_tasks", default=None)


@dataclass(frozen=True, slots=True)
class Admission:
    entry_id: str = ""
    # Set when refused: "rate_limited", "too_many_tasks" or "queue_full" (the metric's reason label).
    refused: str = ""
    retry_after_s: int = 0
    detail: str = ""  # why, when the reason alone does not say (Redis at its maxmemory)


class Admitter:
    """Admits tasks into one shard's stream. With K shards (tasks/shards.py) a client's rate, burst
    and share are split evenly between them, 1/K in each: the dispatcher offers a refused task to
    the next shard, so a client is refused only once every shard refused it. `max_queue` is each
    shard's own stream's bound."""

    def __init__(
        self, rate: float, burst: int, max_queue: int, retry_after_s: int, client_tasks: int = 0,
        reserve: float = 0.0, shards: int = 1,
    ) -> None:  # fmt: skip
        self.rate, self.burst, self.max_queue, self.retry_after_s = rate, burst, max_queue, retry_after_s
        self.client_tasks = client_tasks  # each client's share of the queue; 0: none
        # The queue's room that only continuations of running /sparql queries may take (QueryTasks).
        self.reserved = int(max_queue * reserve)
        self.shard_rate, self.shard_burst = rate / shards, math.ceil(burst / shards)
        self.shard_client_tasks = math.ceil(client_tasks / shards)

    def bound(self, continuation: bool) -> int:
        """The queue's length at which a task is refused: the whole bound for a continuation of a
        running /sparql query, less the reserve for any other task."""
        return self.max_queue if continuation else self.max_queue - self.reserved

    async def admit(
        self, conn: RespConnection, client: str, task: bytes, charge: bool = True, continuation: bool = False
    ) -> Admission:
        """Enqueue `task` unless the client is over its rate (when `charge`d) or holds its share
        of the queue, or the queue is full (raises RedisError). A quantum of a query already
        admitted is not charged, but it counts in the client's share; a `continuation` of a running
        /sparql query may take the queue's reserve."""
        bound = self.bound(continuation)
        rate = self.shard_rate if charge else 0
        args = [rate, self.shard_burst, bound, keys.GROUP, task, self.shard_client_tasks, HOLD_MS]
        script_keys = [keys.rate(client), keys.TASKS, keys.client_tasks(client)]
        code, value = await run_script(conn, ADMIT_SHA, ADMIT_LUA, script_keys, args)
        if code == 0:
            return Admission(entry_id=value.decode() if isinstance(value, bytes) else str(value))
        if code == 1:
            return Admission(refused="rate_limited", retry_after_s=max(1, math.ceil(int(value) / 1000)))
        if code == 3:
            return Admission(refused="too_many_tasks", retry_after_s=self.retry_after_s)
        return Admission(refused="queue_full", retry_after_s=self.retry_after_s)


MEMORY_FULL = "Redis is at its memory limit (maxmemory); retry later"


def out_of_memory(error: BaseException) -> bool:
    """Whether Redis refused a write because it is at its maxmemory (policy noeviction): the
    queue is full, not down (503 queue-full, retry later)."""
    return isinstance(error, ResponseError) and "command not allowed when used memory" in str(error)


def client_id(request: Request, settings: Settings) -> str:
    """Whose quotas: the client's address, or an authenticated API key's (hashed: keys never
    reach Redis). A key counts only when its SHA-256 is in QUANTA_API_KEY_HASHES: any client
    can invent keys, so an unknown one changes nothing (it was 30 quotas for 30 invented keys).

    Behind a proxy (trust_forwarded) the address is the last X-Forwarded-For hop,
    the one the proxy itself appended; earlier hops are whatever the client wrote.
    """
    api_key = request.headers.get("x-api-key")
    if api_key and settings.api_key_hashes:
        digest = hashlib.sha256(api_key.encode()).hexdigest()
        if digest in authenticated_keys(settings.api_key_hashes):
            return "key:" + digest[:32]
    if settings.trust_forwarded:
        forwarded = request.headers.get("x-forwarded-for")
        if forwarded:
            return "ip:" + fairness_key(forwarded.rsplit(",", 1)[-1].strip())
    return "ip:" + (fairness_key(request.client.host) if request.client else "unknown")


def fairness_key(address: str) -> str:
    """Which client an address stands for, for fair use (client_id) and the connections one address
    may hold (server.GuardedProtocol): an IPv4 address is itself; an IPv6 address is its /64 (a host
    is usually given a whole /64, so a quota per /128 would be no quota: "2001:db8:0:1::/64"); an
    IPv4-mapped IPv6 address is its IPv4 address. Anything else (not an address) is as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))  # int(): without a zone (fe80::1%eth0)
    return str(ip)


@lru_cache(maxsize=4)
def authenticated_keys(api_key_hashes: str) -> frozenset[str]:
    """The digests in QUANTA_API_KEY_HASHES (checked by the settings), parsed once."""
    return frozenset(h.strip().lower() for h in api_key_hashes.split(",") if h.strip())
