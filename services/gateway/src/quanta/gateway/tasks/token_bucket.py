"""The token bucket both admission scripts take from (admission.py: a client's tasks;
sparql_endpoint/fair_use.py: a client's new /sparql queries), written once in Lua.

`script(body)` puts two local functions before a script's `body`: `now_ms()`, Redis's clock
(TIME), so every gateway agrees on it; and `take_token(key, now, rate, burst)`, which refills the
bucket at `key` (a hash: tokens, ts in ms) at `rate` tokens a second up to `burst`, takes one if
there is one, and returns 0, or else the milliseconds until there is one. It writes the bucket
either way (HSET is a write Redis refuses at its maxmemory: a script calls it before any other).
"""

from __future__ import annotations

import hashlib

PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function take_token(key, now, rate, burst)
  local bucket = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens = tonumber(bucket[1]) or burst
  local ts = tonumber(bucket[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
  local wait = 0
  if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 1000 / rate) end
  redis.call('HSET', key, 'tokens', tokens, 'ts', now)
  redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
  return wait
end
"""


def script(body: str) -> tuple[str, str]:
    """The Lua of `body` after the prelude, and its SHA-1 (for EVALSHA)."""
    lua = PRELUDE + body
    return lua, hashlib.sha1(lua.encode()).hexdigest()
