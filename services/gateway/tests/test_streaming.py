"""Streamed responses over real HTTP (uvicorn in a thread): results go out when
the query is about to wait; a failure before the first result is a problem,
after it the response is cut short (no client can take it for complete)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, MutableMapping
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from quanta.client.transport import QueryError
from quanta.common.redis_server import free_port
from quanta.gateway.sparql_endpoint.streaming import Output, Produce, Render, ResultStream, next_or_flush
from quanta.sparql import results
from quanta.sparql.errors import ErrorKind

ROWS = [(f'"{i}"',) for i in range(3)]


async def rows_then(failure: Exception | None, before: int) -> AsyncIterator[tuple[str]]:
    """ROWS, one quantum (a short wait) apart, failing after `before` of them."""
    for i, row in enumerate(ROWS):
        if i == before and failure is not None:
            raise failure
        await asyncio.sleep(0.01)
        yield row


def produce_until(failure: Exception | None, before: int) -> tuple[Produce, Render]:
    writer = results.writer("json")

    async def produce(out: Output) -> None:
        out.text(writer.head(["x"]))
        items = rows_then(failure, before)
        while True:
            try:
                out.row(await next_or_flush(items, out.flush))
            except StopAsyncIteration:
                break
        out.text(writer.end())

    return produce, writer.rows


def app() -> Starlette:
    cases = {
        "whole": (None, 0),
        "before": (QueryError(ErrorKind.UNKNOWN_GRAPH, "no such graph"), 0),
        "busy": (QueryError(ErrorKind.QUEUE_FULL, "full", retry_after_s=2.0), 0),
        "bug": (RuntimeError("a bug"), 0),
        "after": (QueryError(ErrorKind.REDIS_UNAVAILABLE, "gone"), 2),
    }

    async def endpoint(request: Request) -> ResultStream:
        produce, render = produce_until(*cases[request.path_params["case"]])

        async def close() -> None:
            pass

        return ResultStream(
            produce, render, content_type="application/sparql-results+json", headers={}, form="select",
            fmt="json", close=close, started_at=time.perf_counter(),
        )  # fmt: skip

    return Starlette(routes=[Route("/{case}", endpoint)])


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app(), host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.005)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        yield http
    server.should_exit = True
    thread.join(timeout=10)


def test_a_whole_answer(client: httpx.Client) -> None:
    response = client.get("/whole")
    assert response.status_code == 200
    assert [b["x"]["value"] for b in response.json()["results"]["bindings"]] == ["0", "1", "2"]


def test_each_result_goes_out_before_the_next_wait(client: httpx.Client) -> None:
    with client.stream("GET", "/whole") as response:
        chunks = list(response.iter_raw())
    assert len(chunks) >= 3  # one per quantum, not one at the end


def test_a_failure_before_any_result_is_a_problem(client: httpx.Client) -> None:
    response = client.get("/before")
    assert response.status_code == 404 and response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"].endswith("/unknown-graph")
    busy = client.get("/busy")
    assert busy.status_code == 503 and busy.headers["retry-after"] == "2"
    bug = client.get("/bug")
    assert bug.status_code == 500 and "a bug" not in bug.text


def test_a_failure_after_results_cuts_the_response_short(client: httpx.Client) -> None:
    received = b""
    status = 0
    with (
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
        client.stream("GET", "/after") as response,
    ):
        status = response.status_code
        for chunk in response.iter_bytes():
            received += chunk
    assert status == 200
    assert received.startswith(b'{"head"') and not received.endswith(b"]}}")


def test_next_or_flush_flushes_only_before_a_wait() -> None:
    asyncio.run(_flushes_only_before_a_wait())


async def _flushes_only_before_a_wait() -> None:
    async def items() -> AsyncIterator[int]:
        yield 1
        yield 2  # ready at once: no flush
        await asyncio.sleep(0.01)
        yield 3

    flushes: list[int] = []
    got: list[int] = []
    iterator = items()

    async def flush() -> None:
        flushes.append(len(got))

    while True:
        try:
            got.append(await next_or_flush(iterator, flush))
        except StopAsyncIteration:
            break
    assert got == [1, 2, 3] and flushes == [2]


def test_next_or_flush_passes_a_cancellation_into_the_waiting_iterator() -> None:
    asyncio.run(_passes_a_cancellation())


async def _passes_a_cancellation() -> None:
    closed = asyncio.Event()
    never = asyncio.Event()

    async def items() -> AsyncIterator[int]:
        try:
            await never.wait()
            yield 1
        finally:
            closed.set()

    async def flush() -> None:
        pass

    waiting = asyncio.create_task(next_or_flush(items(), flush))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert closed.is_set()


def test_an_iterators_timeout_that_expires_while_a_slow_reader_holds_the_flush_is_its_own() -> None:
    asyncio.run(_timeout_during_flush())


async def _timeout_during_flush() -> None:
    """The dispatcher waits for Redis under asyncio.timeout; were the cancellation that
    timeout sends left where this task was (a flush held by a slow reader), the whole
    response would die with it."""

    async def items() -> AsyncIterator[str]:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(10)
        except TimeoutError:
            yield "timed out, and carried on"

    async def slow_flush() -> None:
        await asyncio.sleep(0.2)

    assert await next_or_flush(items(), slow_flush) == "timed out, and carried on"


def test_a_send_cancelled_while_the_reader_is_slow_keeps_its_bytes() -> None:
    asyncio.run(_send_cancelled())


async def _send_cancelled() -> None:
    sent: list[bytes] = []
    reader_is_slow = True

    async def send(message: MutableMapping[str, Any]) -> None:
        if reader_is_slow:
            await asyncio.sleep(10)  # uvicorn waits for the socket to drain before it writes
        sent.append(message["body"])

    async def start() -> None:
        pass

    out = Output(lambda rows: "".join(rows), start, send)
    out.row("a")
    flushing = asyncio.create_task(out.flush())
    await asyncio.sleep(0.01)
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    reader_is_slow = False
    out.row("b")
    await out.finish()
    assert sent == [b"ab"] and out.complete and out.sent_bytes == 2
