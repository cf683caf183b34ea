"""Admission: a per-client token bucket and a bounded queue, checked and enqueued in one Lua script.

One script means one round trip and no race between "is there room" and
"enqueue": many gateway processes can share the bound. Rate first, so a
client flooding a full queue is told it is the one flooding (429, not 503).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from starlette.requests import Request

from quanta.common import keys
from quanta.gateway.resp import RespConnection, run_script

# KEYS[1] the client's bucket (hash: tokens, ts in ms), KEYS[2] the task stream.
# ARGV: rate (tokens/s, 0: no limit), burst, max queue, group, task bytes.
# Returns {0, entry id} | {1, retry after ms} (rate limited) | {2, depth} (queue full).
# The clock is Redis's (TIME), so every gateway agrees on it.
ADMIT_LUA = """
local rate = tonumber(ARGV[1])
if rate > 0 then
  local burst = tonumber(ARGV[2])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
  local tokens = tonumber(bucket[1]) or burst
  local ts = tonumber(bucket[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
  local admitted = tokens >= 1
  if admitted then tokens = tokens - 1 end
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
  if not admitted then return {1, math.ceil((1 - tokens) * 1000 / rate)} end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  -- A new (or restarted, empty) Redis: make the group read from the start, so
  -- tasks queued before any worker asked are still delivered.
  redis.call('XGROUP', 'CREATE', KEYS[2], ARGV[4], '0', 'MKSTREAM')
else
  local depth = redis.call('XLEN', KEYS[2])
  if depth >= tonumber(ARGV[3]) then return {2, depth} end
end
return {0, redis.call('XADD', KEYS[2], '*', 'task', ARGV[5])}
"""


@dataclass(frozen=True, slots=True)
class Admission:
    entry_id: str = ""
    # Set when refused: "rate_limited" or "queue_full" (the metric's reason label).
    refused: str = ""
    retry_after_s: int = 0


ADMIT_SHA = hashlib.sha1(ADMIT_LUA.encode()).hexdigest()


class Admitter:
    def __init__(self, rate: float, burst: int, max_queue: int, retry_after_s: int) -> None:
        self.rate, self.burst, self.max_queue, self.retry_after_s = rate, burst, max_queue, retry_after_s

    async def admit(self, conn: RespConnection, client: str, task: bytes, charge: bool = True) -> Admission:
        """Enqueue `task` unless the client is over its rate (when `charge`d) or the queue is full
        (raises RedisError). A quantum of a query already admitted is not charged."""
        args = [self.rate if charge else 0, self.burst, self.max_queue, keys.GROUP, task]
        code, value = await run_script(conn, ADMIT_SHA, ADMIT_LUA, [keys.rate(client), keys.TASKS], args)
        if code == 0:
            return Admission(entry_id=value.decode() if isinstance(value, bytes) else str(value))
        if code == 1:
            return Admission(refused="rate_limited", retry_after_s=max(1, math.ceil(int(value) / 1000)))
        return Admission(refused="queue_full", retry_after_s=self.retry_after_s)


def client_id(request: Request, trust_forwarded: bool) -> str:
    """Whose bucket: the API key (hashed: keys never reach Redis) or the client address.

    Behind a proxy (trust_forwarded) the address is the last X-Forwarded-For hop,
    the one the proxy itself appended; earlier hops are whatever the client wrote.
    """
    api_key = request.headers.get("x-api-key")
    if api_key:
        return "key:" + hashlib.sha256(api_key.encode()).hexdigest()[:32]
    if trust_forwarded:
        forwarded = request.headers.get("x-forwarded-for")
        if forwarded:
            return "ip:" + forwarded.rsplit(",", 1)[-1].strip()
    return "ip:" + (request.client.host if request.client else "unknown")
