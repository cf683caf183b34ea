"""The query route's Redis connections: RESP over an asyncio protocol, parsed by hiredis.

Each query request sends two commands (the admission script, then a BLPOP
for the reply). Through redis-py's asyncio client a command costs ~0.15 ms
of Python on top of the network; through this protocol it costs ~0.03 ms,
which takes about a third off the gateway -> Redis -> worker -> gateway
round trip (docs/benchmarks.md). Everything else (probes, metrics,
clean-ups) keeps using redis-py.

Replies arrive in the order commands were sent, so a connection is a queue
of futures. A connection whose command failed, timed out or was cancelled
is closed, never reused: its next reply could belong to the abandoned command.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import hiredis
from redis.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError, NoScriptError, ResponseError


class RespConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self.parser = hiredis.Reader(replyError=ResponseError)
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports don't subclass asyncio's

    def data_received(self, data: bytes) -> None:
        self.parser.feed(data)
        while True:
            try:
                reply = self.parser.gets()
            except hiredis.ProtocolError:
                self.close()  # not RESP: connection_lost fails whoever waits
                return
            if reply is False:
                return
            if not self.waiting:  # a reply nobody asked for: out of step, nothing after it can be trusted
                self.close()
                return
            future = self.waiting.popleft()
            if future.done():  # cancelled: the connection is being closed anyway
                continue
            if isinstance(reply, ResponseError):
                future.set_exception(NoScriptError(str(reply)) if str(reply).startswith("NOSCRIPT") else reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(ConnectionError(f"connection to Redis lost: {exc or 'closed by the server'}"))

    def call(self, *args: str | bytes | int | float) -> asyncio.Future[Any]:
        """Send one command; the future is its reply (ResponseError for an error reply)."""
        if self.closed or self.transport is None:
            raise ConnectionError("connection to Redis is closed")
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(hiredis.pack_command(args))
        return future

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class RespPool:
    """Connections to the Redis of `url` (redis://, rediss://, unix://), opened on demand and reused."""

    def __init__(self, url: str, connect_timeout_s: float, max_idle: int = 64) -> None:
        self.options = parse_url(url)
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle  # beyond it, a burst's extra connections are closed when done
        self.idle: collections.deque[RespConnection] = collections.deque()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[RespConnection]:
        conn = self._reuse() or await self._open()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        if conn.closed or conn.waiting or len(self.idle) >= self.max_idle:
            conn.close()
        else:
            self.idle.append(conn)

    def _reuse(self) -> RespConnection | None:
        while self.idle:
            conn = self.idle.pop()  # the most recent: the likeliest to still be open
            if not conn.closed:
                return conn
        return None

    async def _open(self) -> RespConnection:
        loop = asyncio.get_running_loop()
        o = self.options
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if "path" in o:
                    _, conn = await loop.create_unix_connection(RespConnection, o["path"])
                else:
                    tls = ssl.create_default_context() if o.get("connection_class") is SSLConnection else None
                    _, conn = await loop.create_connection(
                        RespConnection, o.get("host", "localhost"), o.get("port", 6379), ssl=tls
                    )
                if o.get("password"):
                    await conn.call("AUTH", *([o["username"]] if o.get("username") else []), o["password"])
                if o.get("db"):
                    await conn.call("SELECT", o["db"])
        except (OSError, TimeoutError) as error:
            raise ConnectionError(f"cannot connect to Redis: {error!r}") from error
        return conn

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()


async def run_script(conn: RespConnection, sha: str, script: str, keys: list[str], args: list[Any]) -> Any:
    """EVALSHA, falling back to EVAL once when Redis lost its script cache (a restart)."""
    try:
        return await conn.call("EVALSHA", sha, len(keys), *keys, *args)
    except NoScriptError:
        return await conn.call("EVAL", script, len(keys), *keys, *args)
