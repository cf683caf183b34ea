"""Every request a query sends goes through its `Requester`: retries with
backoff (bounded), the `on_request` hook, the counts, and cancellation.

Retryable failures (rate limited, queue full, Redis down, reply timeout,
unreachable) are sent again after the server's `retry_after_s`, or an
exponential backoff, up to `Retry.attempts` times; then the error is raised,
never swallowed. A reply timeout's `next` replaces the request's input
(nothing is skipped or repeated: a saved plan resumes the same state).
Once `close()` has run, no request is sent any more.

`Retry` is the clients' one retry policy: `QuantaClient` (quanta.client.http)
follows it too, page by page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quanta.client.transport import QueryError, SubPage, SubRequest, Transport
from quanta.sparql.errors import ErrorKind


@dataclass(frozen=True, slots=True)
class RequestEvent:
    """One request to the server, as the `on_request` hook sees it."""

    name: str  # the query's name (`prepare(..., name=)`), else "query"
    status: str  # "ok", or the slug of the error kind it ended with
    elapsed_s: float
    bytes: int
    stats: Mapping[str, Any] = field(default_factory=dict)
    request: SubRequest | None = None
    next: str | None = None  # the page's `next` ("ok" only): the request that continues this server query sends it


OnRequest = Callable[[RequestEvent], None]


@dataclass(frozen=True, slots=True)
class Retry:
    """How retryable failures are retried: `attempts` resends at most, waiting
    the server's Retry-After, else `base_s` doubling up to `max_s`."""

    attempts: int = 10
    base_s: float = 0.1
    max_s: float = 10.0
    unreachable_attempts: int = 5  # ~3 s: enough for a gateway restart, not to hang on a wrong URL

    def allows(self, attempt: int, error: QueryError) -> bool:
        """Whether to send again after `attempt` retries ended with `error`."""
        limit = self.unreachable_attempts if error.kind is ErrorKind.UNREACHABLE else self.attempts
        return error.kind.retryable and attempt < limit

    def delay(self, attempt: int, error: QueryError) -> float:
        if error.retry_after_s is not None:
            return min(error.retry_after_s, self.max_s * 3)
        return float(min(self.base_s * 2**attempt, self.max_s))

    def again(self, attempt: int, error: QueryError, request: SubRequest) -> tuple[SubRequest, float]:
        """What to send after `attempt` retries of `request` ended with `error` (the same
        request, or the `next` a reply timeout handed back), and how long to wait first;
        `error` itself when it is not to be retried."""
        if not self.allows(attempt, error):
            raise error
        return (request.resumed(error.next) if error.next else request), self.delay(attempt, error)


DEFAULT_RETRY = Retry()


class Cancelled(Exception):
    """The query was closed (`Execution.aclose`): no further request is sent."""


class Requester:
    def __init__(
        self,
        transport: Transport,
        *,
        name: str = "query",
        on_request: OnRequest | None = None,
        retry: Retry = DEFAULT_RETRY,
    ) -> None:
        self.transport = transport
        self.name = name
        self.on_request = on_request
        self.retry = retry
        self.requests = 0  # sent, retries included
        self.bytes = 0
        self.closed = False

    def close(self) -> None:
        self.closed = True

    async def page(self, request: SubRequest) -> SubPage:
        """One page, retried while the failure is retryable (bounded)."""
        attempt = 0
        while True:
            if self.closed:
                raise Cancelled("the query was closed")
            self.requests += 1
            started = time.perf_counter()
            try:
                page = await self.transport.run(request)
            except QueryError as error:
                self._report(request, error.kind.slug, started, 0, {})
                request, wait = self.retry.again(attempt, error, request)
                await asyncio.sleep(wait)
                attempt += 1
                continue
            self.bytes += page.bytes
            self._report(request, "ok", started, page.bytes, page.stats, page.next)
            return page

    async def pages(self, request: SubRequest) -> AsyncIterator[SubPage]:
        """Every page of one server query, following `next`; stops sending as
        soon as the consumer stops asking (early termination)."""
        while True:
            page = await self.page(request)
            yield page
            if page.next is None:
                return
            request = request.resumed(page.next)

    def _report(
        self, request: SubRequest, status: str, started: float, size: int, stats: Mapping[str, Any],
        next: str | None = None,
    ) -> None:  # fmt: skip
        if self.on_request is not None:
            elapsed = time.perf_counter() - started
            self.on_request(RequestEvent(self.name, status, elapsed, size, stats, request, next))
