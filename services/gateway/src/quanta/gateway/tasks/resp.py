"""The hot path's Redis connections: RESP over an asyncio protocol, parsed by hiredis.

Why a second Redis client beside redis-py (quanta.common.connect: the probes,
metrics and clean-ups use it, and so do the workers): each task the gateway
sends costs two commands here (the admission script, then a BLPOP for the
reply), and this protocol spends a third of the Python that redis-py's
asyncio client spends on one. Measured with `python bench/resp.py` (an LPUSH
then a BLPOP, a task's reply path, on a local redis-server and uvloop;
2026-11-27, 2 shared cores), a pair: redis-py 85-88 µs wall at p50 and
66-79 µs of the gateway's CPU on average, this pool 39-40 µs and 20-26 µs:
about 45 µs off each task's round trip (0.7-0.9 ms at p50, docs/benchmarks.md), and
two thirds of the gateway's CPU for Redis, which bounds its throughput once
the workers keep up. Everything else stays on redis-py, which parses every
reply type (XINFO, streams) and is the one client the workers share.

Replies arrive in the order commands were sent, so a connection is a queue
of futures. A connection whose command failed, timed out or was cancelled
is closed, never reused: its next reply could belong to the abandoned command.

The pool speaks what the chart allows: plain Redis, TLS (`rediss://` with the
CA and client certificate of RedisSettings) and Sentinel (each new connection
asks a Sentinel for the current master and checks its ROLE, so after a
failover new connections go to the new master; old ones fail and are closed).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import hiredis
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from quanta.common.settings import RedisSettings


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
        self.transport.write(hiredis.pack_command(args))  # type: ignore[arg-type]  # its stub wants a 1-tuple
        return future

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class RespPool:
    """Connections to one Redis (redis://, rediss://, unix://, or the master its Sentinels name),
    opened on demand and reused."""

    def __init__(self, redis: str | RedisSettings, connect_timeout_s: float | None = None, max_idle: int = 64) -> None:
        self.settings = RedisSettings(url=redis) if isinstance(redis, str) else redis
        self.settings.check()
        self.connect_timeout_s = connect_timeout_s or self.settings.connect_timeout_s
        self.tls = self.settings.ssl_context()
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
        s = self.settings
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if s.url.startswith("unix://"):
                    _, conn = await asyncio.get_running_loop().create_unix_connection(
                        RespConnection, urlsplit(s.url).path
                    )
                else:
                    host, port = await self._master() if s.sentinels else s.address()
                    conn = await self._connect(host, port)
                user, password = s.credentials()
                if password:
                    await conn.call("AUTH", *([user] if user else []), password)
                if s.db():
                    await conn.call("SELECT", s.db())
                if s.sentinels:
                    role = await conn.call("ROLE")
                    if role[0] != b"master":  # a Sentinel that has not seen the failover yet
                        conn.close()
                        raise ConnectionError(f"{host}:{port} is a {role[0].decode()}, not the master")
        except (OSError, TimeoutError) as error:
            raise ConnectionError(f"cannot connect to Redis: {error!r}") from error
        return conn

    async def _connect(self, host: str, port: int) -> RespConnection:
        _, conn = await asyncio.get_running_loop().create_connection(RespConnection, host, port, ssl=self.tls)
        return conn

    async def _master(self) -> tuple[str, int]:
        """Ask each Sentinel in turn for the master's address."""
        s = self.settings
        errors = []
        for host, port in s.sentinel_addresses():
            try:
                sentinel = await self._connect(host, port)
            except OSError as error:
                errors.append(f"{host}:{port}: {error}")
                continue
            try:
                if s.sentinel_password:
                    await sentinel.call("AUTH", s.sentinel_password)
                answer = await sentinel.call("SENTINEL", "get-master-addr-by-name", s.sentinel_master)
            except (ConnectionError, ResponseError) as error:
                errors.append(f"{host}:{port}: {error}")
                continue
            finally:
                sentinel.close()
            if answer:
                return answer[0].decode(), int(answer[1])
            errors.append(f"{host}:{port}: no master named {s.sentinel_master!r}")
        raise ConnectionError(f"no Sentinel named a master: {'; '.join(errors)}")

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()


async def run_script(conn: RespConnection, sha: str, script: str, keys: list[str], args: list[Any]) -> Any:
    """EVALSHA, falling back to EVAL once when Redis lost its script cache (a restart)."""
    try:
        return await conn.call("EVALSHA", sha, len(keys), *keys, *args)
    except NoScriptError:
        return await conn.call("EVAL", script, len(keys), *keys, *args)
