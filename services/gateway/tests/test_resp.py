"""The lean RESP pool (resp.py) against a real redis-server, on both event loops the gateway may run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import redis
import uvloop

from quanta.common.redis_server import RedisServer, redis_server
from quanta.gateway.tasks.resp import RespPool, run_script

LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    return LOOPS[request.param]


def test_commands_replies_and_errors(redis_url: str, run: Callable[..., Any]) -> None:
    async def main() -> None:
        pool = RespPool(redis_url, connect_timeout_s=1)
        async with pool.connection() as conn:
            assert await conn.call("SET", "k", b"\x00\xffbytes") == b"OK"
            assert await conn.call("GET", "k") == b"\x00\xffbytes"
            assert await conn.call("BLPOP", "empty", 0.05) is None
            with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
                await conn.call("LPUSH", "k", "x")
            # an error reply leaves the connection in step: the next reply is the next command's
            assert await conn.call("PING") == b"PONG"
        pool.close()

    run(main())


def test_connections_are_reused_unless_a_command_was_abandoned(redis_url: str, run: Callable[..., Any]) -> None:
    async def main() -> None:
        pool = RespPool(redis_url, connect_timeout_s=1)
        async with pool.connection() as first:
            pass
        async with pool.connection() as again:
            assert again is first
        with pytest.raises(TimeoutError):
            async with pool.connection() as abandoned, asyncio.timeout(0.05):
                await abandoned.call("BLPOP", "nothing", 5)
        assert abandoned is first and abandoned.closed  # its late reply must not answer someone else
        async with pool.connection() as fresh:
            assert fresh is not first
            assert await fresh.call("PING") == b"PONG"
        pool.close()

    run(main())


def test_script_survives_a_flushed_script_cache(redis_url: str, run: Callable[..., Any]) -> None:
    script = "return ARGV[1] .. KEYS[1]"
    sha = redis.Redis.from_url(redis_url).script_load(script)

    async def main() -> None:
        pool = RespPool(redis_url, connect_timeout_s=1)
        async with pool.connection() as conn:
            assert await run_script(conn, sha, script, ["k"], ["v"]) == b"vk"
            await conn.call("SCRIPT", "FLUSH")
            assert await run_script(conn, sha, script, ["k"], ["w"]) == b"wk"
        pool.close()

    run(main())


def test_password_and_database_from_the_url(run: Callable[..., Any]) -> None:
    with redis_server() as server:
        redis.Redis.from_url(server.url).config_set("requirepass", "s3cret")
        url = f"redis://:s3cret@127.0.0.1:{server.port}/3"

        async def main() -> None:
            pool = RespPool(url, connect_timeout_s=1)
            async with pool.connection() as conn:
                await conn.call("SET", "where", "db3")
            pool.close()
            with pytest.raises(redis.ResponseError):  # wrong password
                async with RespPool(url.replace("s3cret", "nope"), connect_timeout_s=1).connection():
                    pass

        run(main())
        assert redis.Redis(port=server.port, password="s3cret", db=3).get("where") == b"db3"


def test_redis_down_and_back(run: Callable[..., Any]) -> None:
    server = RedisServer().start()
    try:

        async def main() -> None:
            pool = RespPool(server.url, connect_timeout_s=1)
            async with pool.connection() as conn:
                await conn.call("PING")
            server.stop()
            await asyncio.sleep(0.1)  # the pooled connection sees the server close it
            with pytest.raises(redis.ConnectionError):
                async with pool.connection():
                    pass
            server.start()
            async with pool.connection() as conn:  # no stale connection handed out
                assert await conn.call("PING") == b"PONG"
            pool.close()

        run(main())
    finally:
        server.stop()


def test_a_server_that_is_not_redis_fails_the_command_at_once(run: Callable[..., Any]) -> None:
    async def main() -> None:
        async def answer_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(100)
            writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            await writer.drain()

        server = await asyncio.start_server(answer_http, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = RespPool(f"redis://127.0.0.1:{port}/0", connect_timeout_s=1)
        with pytest.raises(redis.ConnectionError):
            async with pool.connection() as conn, asyncio.timeout(2):
                await conn.call("PING")
        server.close()

    run(main())
