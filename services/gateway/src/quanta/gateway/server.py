"""The HTTP connection under the application, bounded as a mature server bounds it.

uvicorn's HTTP protocol (httptools) reads a request's headers with no deadline
and no size limit, and accepts connections until the process runs out of file
descriptors: a few hundred half-sent requests lock every new client out, and
one request's 200 MiB of headers stay in memory. `GuardedProtocol` is that
protocol with what nginx calls client_header_timeout, keepalive_timeout,
send_timeout, large_client_header_buffers and worker_connections:

- the request line and headers must arrive within `header_timeout_s` of the
  connection's start (or of a kept-alive connection's next request): 408, or a
  plain close when not a byte of a request came;
- a kept-alive connection idle for `idle_timeout_s` between requests is closed;
- a client that reads not one byte of its answer for `send_timeout_s` is
  dropped (a slow reader that reads is never cut, however long the answer);
- the request line may carry `max_body_bytes` (what a POST could: 414) and the
  header fields `max_header_bytes` (431), counted as they arrive;
- at most `max_connections` per process (and never more than half its file
  descriptors): at the cap a new connection takes the place of the one that has
  waited longest without a request running (idle, or still sending its
  headers); when every connection runs a request, it gets 503;
- at most `max_connections_per_address` per client address (an IPv6 address's
  /64: admission.fairness_key, as fair use counts clients), by the same rule
  among that address's connections: its own longest-waiting one is closed, or,
  when each of them runs a request, the newcomer gets 503. Not applied behind a
  proxy (trust_forwarded): every connection is then the proxy's, whose own
  per-client limit (nginx's limit_conn) is the one that can see clients.

The body's deadline (between two chunks) is the Edge middleware's, which sees
when the application waits for it.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import resource
import struct
import termios
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from quanta.gateway import metrics
from quanta.gateway.config import Settings, get_settings
from quanta.gateway.problems import MEDIA_TYPE, Problem
from quanta.gateway.tasks.admission import fairness_key
from quanta.sparql.errors import ErrorKind

# After a refusal, what the client still sends is read and dropped this long, so that it
# reads the answer instead of a reset (nginx's lingering close).
LINGER_S = 2.0
# Of the process's file descriptors, the share connections may take: Redis, spill files
# and the process itself need the rest.
FD_SHARE = 0.5

Phase = Literal["head", "idle", "request", "closing"]


@dataclass(frozen=True, slots=True)
class Limits:
    header_timeout_s: float
    idle_timeout_s: float
    send_timeout_s: float
    max_url_bytes: int
    max_header_bytes: int
    max_connections: int
    max_connections_per_address: int  # 0: no cap

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            header_timeout_s=settings.header_timeout_s, idle_timeout_s=settings.idle_timeout_s,
            send_timeout_s=settings.send_timeout_s, max_url_bytes=settings.max_body_bytes,
            max_header_bytes=settings.max_header_bytes, max_connections=settings.max_connections,
            max_connections_per_address=0 if settings.trust_forwarded else settings.max_connections_per_address,
        )  # fmt: skip


@cache
def process_limits() -> Limits:
    """This process's limits, from its settings (uvicorn builds the protocol; each worker process reads its own)."""
    return Limits.of(get_settings())


def connection_cap(configured: int) -> int:
    """The configured cap, lowered to a share of the file descriptors this process may open."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, int(soft * FD_SHARE)))


# This process's connections by client (fairness_key), for max_connections_per_address.
_by_address: dict[str, set[GuardedProtocol]] = {}


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines, size caps and a connection cap (see the module)."""

    def __init__(
        self, config: Config, server_state: ServerState, app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:  # fmt: skip
        super().__init__(config, server_state, app_state, _loop)
        self.limits = process_limits()
        self.phase: Phase = "head"
        self.since = 0.0  # when the current wait (head or idle) began: the longest waiter goes first
        self._deadline: asyncio.TimerHandle | None = None
        self._send_deadline: asyncio.TimerHandle | None = None
        self._unsent = 0  # bytes buffered for the client when its reads stalled
        self._head_bytes = 0  # bytes received while this request's head is incomplete
        self._url_bytes = 0
        self._header_bytes = 0
        self._refusal: Problem | None = None  # set by a parser callback, answered once the parser stops (400's place)
        self.address: str | None = None  # the client, when its connections are counted (_by_address)

    # The connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.since = self.loop.time()
        self._arm(self.limits.header_timeout_s, self._head_timed_out)
        per_address = self.limits.max_connections_per_address
        if per_address and self.client is not None:
            self.address = fairness_key(self.client[0])
            same = _by_address.setdefault(self.address, set())
            same.add(self)
            held = [other for other in same if other.phase != "closing"]  # a refused one only lingers
            if len(held) > per_address:
                detail = f"this client address holds {per_address} connections, each running a request"
                self._make_room(held, per_address, detail, "connections_per_address")
                if self.phase == "closing":
                    return
        # The descriptor limit is read each time (a syscall): raised or lowered at run time, it counts.
        cap = connection_cap(self.limits.max_connections)
        if len(self.connections) > cap:
            self._make_room(self.connections, cap, f"this server holds {cap} connections, each running a request")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.address is not None:
            same = _by_address.get(self.address)
            if same is not None:
                same.discard(self)
                if not same:
                    del _by_address[self.address]
        if self._send_deadline is not None:
            self._send_deadline.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.phase == "closing":
            return  # refused: read and drop (see LINGER_S)
        super().data_received(data)
        if self.phase == "head" and self._refusal is None:
            # httptools keeps a header that has not ended in its own buffer: count what arrives,
            # so that one endless header is cut after at most one read past the limits.
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_url_bytes + self.limits.max_header_bytes:
                self._refuse(self._too_large(ErrorKind.HEADERS_TOO_LARGE, self.limits.max_header_bytes))

    def send_400_response(self, msg: str) -> None:
        """The parser stops on a callback's exception: the refusal it was raised for, else uvicorn's 400."""
        if self._refusal is not None:
            self._refuse(self._refusal)
        else:
            super().send_400_response(msg)

    # The parser's callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._url_bytes = self._header_bytes = 0
        if self.phase == "idle":  # a kept-alive connection's next request: its head has its own deadline
            self.phase, self._head_bytes = "head", 0
            self._arm(self.limits.header_timeout_s, self._head_timed_out)

    def on_url(self, url: bytes) -> None:
        self._url_bytes += len(url)
        if self._url_bytes > self.limits.max_url_bytes:
            self._refusal = self._too_large(ErrorKind.URI_TOO_LONG, self.limits.max_url_bytes)
            raise _Refused
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self._header_bytes > self.limits.max_header_bytes:
            self._refusal = self._too_large(ErrorKind.HEADERS_TOO_LARGE, self.limits.max_header_bytes)
            raise _Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.phase != "request":  # "idle" too: a request pipelined behind the last one ends its head now
            self.phase = "request"
            self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing() and self.phase == "request":
            self.phase, self.since = "idle", self.loop.time()
            self._arm(self.limits.idle_timeout_s, self._idle_timed_out)

    # Writing: the send deadline runs while the transport's buffer is full

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is not None:
            self._send_deadline.cancel()
        self._unsent = self._unsent_bytes()
        self._send_deadline = self.loop.call_later(self.limits.send_timeout_s, self._send_timed_out)

    def resume_writing(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None
        super().resume_writing()

    def _send_timed_out(self) -> None:
        unsent = self._unsent_bytes()
        if unsent < self._unsent:  # the client read something: a slow reader, not a stalled one
            self._unsent = unsent
            self._send_deadline = self.loop.call_later(self.limits.send_timeout_s, self._send_timed_out)
            return
        metrics.REJECTED.labels("send_timeout").inc()
        self.transport.abort()

    def _unsent_bytes(self) -> int:
        """What the client has not taken yet: the transport's buffer and the kernel's send queue
        (a client that reads drains the kernel's first: the transport's may not move for a while)."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        with suppress(OSError, AttributeError):  # not a socket with a send queue: the buffer alone
            unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        return unsent

    # Deadlines and refusals

    def _arm(self, seconds: float, then: Callable[[], object]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timed_out(self) -> None:
        if self.phase != "head":
            return
        metrics.REJECTED.labels("header_timeout").inc()
        if self._head_bytes == 0:  # not a byte of a request: nothing to answer
            self.transport.close()
            return
        limit = self.limits.header_timeout_s
        self._refuse(
            Problem(ErrorKind.REQUEST_TIMEOUT, f"the request's headers did not arrive within {limit:g} s", limit=limit)
        )

    def _idle_timed_out(self) -> None:
        if self.phase != "idle":
            return
        if self.transport.get_write_buffer_size():  # the last answer is still being read: not idle
            self._arm(self.limits.idle_timeout_s, self._idle_timed_out)
            return
        self.transport.close()

    def _too_large(self, kind: ErrorKind, limit: int) -> Problem:
        metrics.REJECTED.labels("too_large").inc()
        what = "the request line exceeds" if kind is ErrorKind.URI_TOO_LONG else "the request's header fields exceed"
        return Problem(kind, f"{what} {limit} bytes", limit=limit)

    def _make_room(self, among: Iterable[object], cap: int, detail: str, reason: str = "connections") -> None:
        """At a cap (of `among`): close the one of them that has waited longest without a request
        running, or refuse this one."""
        waiting = [
            other for other in among
            if isinstance(other, GuardedProtocol) and other is not self and other.phase != "request"
            and not other.transport.get_write_buffer_size()  # still delivering its last answer: not idle
        ]  # fmt: skip
        metrics.REJECTED.labels(reason).inc()
        if waiting:
            oldest = min(waiting, key=lambda other: (other.phase != "closing", other.since))
            oldest.phase = "closing"
            oldest._disarm()
            oldest.transport.abort()
            return
        busy = Problem(ErrorKind.TOO_MANY_CONNECTIONS, detail, {"Retry-After": "1"}, limit=cap, retry_after=1)
        self._refuse(busy)

    def _refuse(self, problem: Problem) -> None:
        """Answer `problem` before any application ran, then close (lingering: see LINGER_S)."""
        self.phase = "closing"
        self._disarm()
        if self.transport.is_closing():
            return
        body = json.dumps(problem.body()).encode()
        fields = [
            *self.server_state.default_headers, (b"content-type", MEDIA_TYPE.encode()),
            (b"content-length", str(len(body)).encode()), (b"connection", b"close"),
            *((name.encode(), value.encode()) for name, value in problem.headers.items()),
        ]  # fmt: skip
        head = b"".join(name + b": " + value + b"\r\n" for name, value in fields)
        self.transport.write(STATUS_LINE[problem.status] + head + b"\r\n" + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._arm(LINGER_S, self.transport.close)


class _Refused(Exception):
    """Raised in a parser callback to stop parsing a request that is refused (see send_400_response)."""
