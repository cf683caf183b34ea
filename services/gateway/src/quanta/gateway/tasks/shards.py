"""The queue's shards: one Redis server each, with its own task stream and workers.

One Redis runs every command on one thread, and a quantum costs it about 145 µs: it keeps about
41 workers of short queries busy (docs/operations.md, One Redis, how far). Past that, a release
runs K of them (QUANTA_REDIS_URL lists them, in order) and each worker serves one.

- A task goes to any shard: it carries all its input (a plan by value resumes anywhere). The
  dispatcher tries them from a random one on, so the load spreads, and a shard that refuses (its
  queue full, or the client at its share there) passes the task to the next.
- A plan kept by reference lives in the Redis of the worker that saved it: the gateway prefixes
  its reference with the shard's index (`plan_ref`) and sends the task that resumes it there
  (`pinned`). Shards are named by their place in the list, so every gateway of a release lists
  them in the same order; a reference to a shard that is not there is refused as expired (410).
- A client's fair use on the SPARQL endpoint (its running queries, its rate of new ones) is
  counted in one shard, its `home`, chosen by a hash of the client: per query, not per quantum.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from quanta.common.connect import async_client
from quanta.common.settings import RedisSettings
from quanta.gateway.tasks.resp import RespPool


@dataclass(frozen=True, slots=True)
class Shard:
    index: int
    # Ordinary commands (probes, metrics, clean-ups): short timeouts and one retry (a pooled
    # connection may predate a Redis restart).
    redis: Redis
    # The hot path's admission and blocking read: no retry (a lost connection means a lost reply
    # list: answer 503 at once rather than wait for nothing).
    pool: RespPool
    name: str  # its address, without credentials, for logs


class Shards:
    def __init__(self, settings: RedisSettings) -> None:
        self.all = [
            Shard(i, async_client(s, retry=Retry(NoBackoff(), 1)), RespPool(s), s.redacted_url())
            for i, s in enumerate(settings.shards())
        ]

    def __len__(self) -> int:
        return len(self.all)

    def in_turn(self) -> list[Shard]:
        """Every shard, from a random one on: the order to offer a new task in."""
        start = random.randrange(len(self.all))
        return self.all[start:] + self.all[:start]

    def home(self, client: str) -> Shard:
        """Where `client`'s fair use on the SPARQL endpoint is counted: the same shard in every gateway."""
        return self.all[zlib.crc32(client.encode()) % len(self.all)]

    def plan_ref(self, shard: Shard, ref: str) -> str:
        """The reference a client is given for a plan kept in `shard`: the shard's index, then the worker's."""
        return ref if len(self.all) == 1 else f"{shard.index}:{ref}"

    def pinned(self, ref: str) -> tuple[Shard, str] | None:
        """The shard that keeps the plan `ref` names, and the worker's reference; None when no shard
        of this gateway can (a reference from a release with other shards)."""
        index, sep, own = ref.partition(":")
        if not sep:
            return (self.all[0], ref) if len(self.all) == 1 else None
        if not index.isdigit() or int(index) >= len(self.all):
            return None
        return self.all[int(index)], own

    async def aclose(self) -> None:
        for shard in self.all:
            await shard.redis.aclose()
            shard.pool.close()
