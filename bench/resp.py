"""The gateway's two Redis clients side by side: what a task's reply path costs, an LPUSH
(a worker's reply) then a BLPOP (the gateway waiting for it), through redis-py's asyncio
client as the gateway builds it (quanta.common.connect) and through the gateway's RESP pool
(quanta.gateway.tasks.resp), on a local redis-server, with uvloop as uvicorn runs it.

    python bench/resp.py [--pairs 20000] [--rounds 5]

Prints, per client, the median wall time of one LPUSH + BLPOP pair and this process's CPU
time per pair (the client's Python: redis-server runs in its own process). The clients take
turns, `rounds` times, so that drift on a shared machine falls on both. Quoted in
quanta.gateway.tasks.resp's docstring and docs/architecture.md; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable

import uvloop

from quanta.common.connect import async_client
from quanta.common.redis_server import redis_server
from quanta.common.settings import RedisSettings
from quanta.gateway.tasks.resp import RespPool

Pair = Callable[[], Awaitable[None]]


def redis_py(url: str) -> Pair:
    client = async_client(RedisSettings(url=url))

    async def pair() -> None:
        await client.lpush("bench:reply", b"page")
        await client.blpop(["bench:reply"], timeout=1)

    return pair


def resp(url: str) -> Pair:
    pool = RespPool(url)

    async def pair() -> None:
        async with pool.connection() as conn:
            await conn.call("LPUSH", "bench:reply", b"page")
            await conn.call("BLPOP", "bench:reply", 1)

    return pair


async def measure(pair: Pair, pairs: int) -> tuple[list[float], float]:
    """Each pair's wall time, and the CPU time of them all."""
    for _ in range(100):  # connections open, code warm
        await pair()
    walls = []
    cpu = time.process_time()
    for _ in range(pairs):
        start = time.perf_counter()
        await pair()
        walls.append(time.perf_counter() - start)
    return walls, time.process_time() - cpu


async def main(pairs: int, rounds: int) -> None:
    with redis_server() as server:
        clients = {"redis-py": redis_py(server.url), "RESP pool": resp(server.url)}
        walls: dict[str, list[float]] = {name: [] for name in clients}
        cpu = dict.fromkeys(clients, 0.0)
        for _ in range(rounds):
            for name, pair in clients.items():
                wall, spent = await measure(pair, pairs // rounds)
                walls[name] += wall
                cpu[name] += spent
        for name in clients:
            n = len(walls[name])
            print(
                f"{name:10} LPUSH+BLPOP p50 {statistics.median(walls[name]) * 1e6:6.1f} µs wall, "
                f"{cpu[name] / n * 1e6:6.1f} µs CPU of this process, over {n} pairs"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    uvloop.run(main(args.pairs, args.rounds))
