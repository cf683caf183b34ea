"""The SPARQL endpoint's response: results streamed as the query produces them.

- **When bytes go out.** Results wait in a buffer while the query produces
  them without waiting, and are sent as soon as it is about to wait (for the
  next quantum, typically), or when the buffer is large. So the first results
  leave about one quantum after the request, whatever the query's total time.
- **Never a partial answer presented as complete.** Nothing is sent before
  the first result (or the end): a failure until then is an ordinary HTTP
  error (problem details). A failure after the status line went out aborts
  the response: the connection is closed without the chunked encoding's last
  chunk, which every HTTP client reports as an error (the document is also
  left unterminated: JSON and XML do not parse).
- **Nothing runs for nobody.** A disconnect cancels the query where it
  waits; `Execution.aclose()` then sends no further task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from quanta.client.plan.parsing import query_error
from quanta.client.transport import QueryError
from quanta.gateway import metrics
from quanta.gateway.problems import MEDIA_TYPE, Problem
from quanta.sparql.errors import ErrorKind, QuantaError

log = logging.getLogger("quanta.gateway")
FLUSH_ROWS = 4096  # rows a query produces without waiting before they are sent anyway
FLUSH_BYTES = 1 << 20  # or bytes of results written (rows of huge literals: a few are a megabyte)
T = TypeVar("T")
Render = Callable[[Sequence[Any]], str]  # rows to text: a results writer's `rows`, a graph writer's `triples`


class Output:
    """Rows and text on their way to the client, in order. `render` writes rows
    (a results or graph writer's `rows`/`triples`); `results` takes rows a
    worker already wrote. Nothing is sent until the first result or the end,
    so that an error before it can still be an HTTP error."""

    def __init__(self, render: Render, start: Callable[[], Awaitable[None]], send: Send) -> None:
        self.render, self.start, self.send = render, start, send
        self.parts: list[bytes] = []
        self.waiting_bytes = 0  # in `parts`
        self.rows: list[Any] = []
        self.results_waiting = False  # `results` bytes among the parts: something to send
        self.started = False
        self.complete = False  # the whole response was sent
        self.sent_bytes = 0
        self.lock = asyncio.Lock()

    def text(self, text: str) -> None:
        self._render()
        self.parts.append(text.encode())

    def text_after_rows(self, text: Callable[[], str]) -> None:
        """`text()` once the rows so far are rendered (what it says may depend on them)."""
        self._render()
        self.parts.append(text().encode())

    def row(self, row: Any) -> None:
        self.rows.append(row)

    def batch(self, rows: list[Any]) -> None:
        """A batch is written at once (its text counts towards `full`): batches are bounded
        in bytes (quanta.client's `Budgets.batch_bytes`), buffered rows are not."""
        self.rows += rows
        self._render()

    def results(self, data: bytes) -> None:
        """Results already in the response's format (a worker wrote them)."""
        if data:
            self._render()
            self.parts.append(data)
            self.results_waiting = True

    @property
    def full(self) -> bool:
        return len(self.rows) >= FLUSH_ROWS or self.waiting_bytes >= FLUSH_BYTES

    def _render(self) -> None:
        if self.rows:
            text = self.render(self.rows).encode()
            self.parts.append(text)
            self.waiting_bytes += len(text)
            self.rows = []
            self.results_waiting = True

    async def flush(self) -> None:
        """Send what is buffered, once there is a result to send."""
        if self.rows or self.results_waiting or (self.started and self.parts):
            await self._send(more=True)

    async def finish(self) -> None:
        await self._send(more=False)

    async def _send(self, more: bool) -> None:
        self._render()
        body, results = b"".join(self.parts), self.results_waiting
        self.parts, self.results_waiting, self.waiting_bytes = [], False, 0
        async with self.lock:
            if not self.started:
                await self.start()
                self.started = True
            # Set before sending: once the last message is out, the client's going is no disconnect.
            self.complete = not more
            try:
                await self.send({"type": "http.response.body", "body": body, "more_body": more})
            except asyncio.CancelledError:
                # Cancelled while the server waited for a slow reader (uvicorn waits before it
                # writes): nothing went out, so it goes with the next send.
                self.parts.insert(0, body)
                self.waiting_bytes += len(body)
                self.results_waiting = self.results_waiting or results
                self.complete = False
                raise
            self.sent_bytes += len(body)


async def next_or_flush(items: AsyncIterator[T], flush: Callable[[], Awaitable[None]]) -> T:
    """The next item; if it is not there yet, `flush` before each wait for it.

    `anext` drives the iterator's coroutine one step by hand: when it finishes
    at once the item was ready; when it yields a future it is about to wait,
    so the buffered results go out before the wait rather than after it. The
    rest of the coroutine is then driven as asyncio's Task would drive it,
    flushing again before each further wait: what arrived meanwhile (the
    progress stream's quanta, while a sort reads its input) goes out too.
    Raises StopAsyncIteration at the end.

    Why by hand: the plain way, a Task for each item awaited with asyncio.wait
    beside an Event that the Output sets when written, costs 4 µs an item that
    is ready and 20 µs one that waits, against 0.5 and 3 µs here (uvloop,
    50,000 items, 2026-11-27); it also runs the iterator in a new task for
    each item (an asyncio.timeout across its `yield` would cancel a finished
    task), and Python 3.11 has no eager tasks to run a step at once.
    """
    step: Coroutine[Any, Any, T] = items.__anext__()  # type: ignore[assignment]
    try:
        waiting = step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    cancelled = False
    while True:
        if not cancelled:  # a cancelled query sends nothing more while it cleans up
            try:
                await flush()
            except asyncio.CancelledError:
                # While a slow reader holds the flush, a cancellation may be the iterator's own
                # (an asyncio.timeout of its frame expiring): deliver it where the iterator
                # waits, as a Task would have. An outside one (the client left) comes back out.
                if isinstance(waiting, asyncio.Future):
                    waiting.cancel()
                try:
                    waiting = step.throw(asyncio.CancelledError())
                except StopIteration as done:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():  # an outside one, swallowed: still cancelled
                        raise asyncio.CancelledError() from None
                    return done.value  # type: ignore[no-any-return]
                continue
            except BaseException:
                step.close()
                raise
        try:
            if waiting is None:  # a bare yield: give the loop one turn
                await asyncio.sleep(0)
            else:
                await asyncio.wait([waiting])
        except asyncio.CancelledError:  # as a Task would: the future is cancelled, the coroutine told
            if isinstance(waiting, asyncio.Future):
                waiting.cancel()
            cancelled = True
            waiting = _throw(step, asyncio.CancelledError())
            continue
        try:
            waiting = step.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def _throw(step: Coroutine[Any, Any, Any], error: BaseException) -> Any:
    """Deliver a cancellation into the driven coroutine (it may clean up and
    wait again); what it raises, including the cancellation, propagates."""
    try:
        return step.throw(error)
    except StopIteration:  # it swallowed the cancellation and returned: still cancelled
        raise asyncio.CancelledError() from None


Produce = Callable[[Output], Awaitable[None]]


class ResultStream(Response):
    """The response of a query: runs `produce` (which writes the query's results
    into an Output), watches for the client leaving, and ends the query in
    every case (`close`: Execution.aclose, the fair-use lease). `failure`: for
    a format that can say a failure in-band (the progress stream), the text
    that says it, so a failure after the first bytes ends the response
    properly instead of aborting it."""

    def __init__(
        self, produce: Produce, render: Render, *, content_type: str,
        headers: dict[str, str], form: str, fmt: str, close: Callable[[], Awaitable[None]], started_at: float,
        failure: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:  # fmt: skip
        # Response's own fields are not used: __call__ writes everything itself.
        self.status_code, self.background = 200, None
        self.produce, self.render_rows, self.close, self.failure = produce, render, close, failure
        self.content_type, self.extra_headers, self.form, self.fmt = content_type, headers, form, fmt
        self.started_at = started_at

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def start() -> None:
            metrics.SPARQL_FIRST_RESULT.observe(time.perf_counter() - self.started_at)
            headers = [(b"content-type", self.content_type.encode())]
            headers += [(k.lower().encode(), v.encode()) for k, v in self.extra_headers.items()]
            await send({"type": "http.response.start", "status": 200, "headers": headers})

        output = Output(self.render_rows, start, send)
        producing = asyncio.create_task(self._run(output, scope, send))
        watching = asyncio.create_task(_disconnected(receive))
        try:
            await asyncio.wait([producing, watching], return_when=asyncio.FIRST_COMPLETED)
            if output.complete:  # answered: what is left is closing the query
                await producing
        finally:
            if not producing.done():  # the client left, or this request was cancelled
                producing.cancel()
                scope.setdefault("state", {})["client_closed"] = True
                try:
                    with contextlib.suppress(asyncio.CancelledError):
                        await producing
                finally:  # counted once the query is ended: no task of it is queued after this
                    self._outcome("disconnected", output)
            watching.cancel()

    async def _run(self, output: Output, scope: Scope, send: Send) -> None:
        try:
            await self.produce(output)
            await output.finish()
            self._outcome("completed", output)
        except Exception as error:  # QueryError, a bug, or a writer refusing a term
            if output.started:
                log.warning("aborting a streamed response", extra={"error": str(error), "form": self.form})
                self._outcome("aborted", output)
                if self.failure is not None:
                    output.rows.clear()  # what is left unsent may be what failed to render
                    output.text(self.failure(query_problem(error).body(scope.get("path", ""))))
                    await output.finish()
                return  # else no last chunk: the client sees the response cut short
            self._outcome("failed", output)
            output.complete = True
            await _problem(error, scope, send)
        finally:
            await self.close()

    def _outcome(self, outcome: str, output: Output) -> None:
        metrics.SPARQL_QUERIES.labels(self.form, outcome).inc()
        metrics.SPARQL_BYTES.labels(self.fmt).inc(output.sent_bytes)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client has gone (or, once the response is complete, at once)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def query_problem(error: Exception) -> Problem:
    """The problem for what ended a query before its results were sent."""
    if isinstance(error, Problem):
        return error
    if isinstance(error, QuantaError):  # the parser's bounds, a results writer refusing a term, ...
        error = query_error(error)
    if not isinstance(error, QueryError):
        log.exception("query failed", exc_info=error)
        return Problem(ErrorKind.INTERNAL)
    wait = round(error.retry_after_s) if error.retry_after_s else None
    return Problem(
        error.kind, error.message, headers={"Retry-After": str(wait)} if wait else None, retry_after=wait,
        line=error.line, column=error.column, operator=error.operator, limit=error.limit,
    )  # fmt: skip


async def _problem(error: Exception, scope: Scope, send: Send) -> None:
    problem = query_problem(error)
    body = json.dumps(problem.body(scope.get("path", ""))).encode()
    headers = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in problem.headers.items()]
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
