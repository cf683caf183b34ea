"""The smart client for plain scripts: the same engine, driven by an event loop of its own.

    with SyncClient(HttpTransport("http://127.0.0.1:8000")) as client:
        for row in client.query("SELECT ...", "watdiv-100k").solutions():
            ...

Not for use inside a running event loop (use SmartClient there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from quanta.client.budgets import DEFAULT_BUDGETS, Budgets
from quanta.client.requester import DEFAULT_RETRY, OnRequest, Retry
from quanta.client.services import ServiceEndpoint
from quanta.client.smart import DatasetSpec, Execution, SmartClient, Triple
from quanta.client.transport import Transport
from quanta.sparql.term_rows import Row

T = TypeVar("T")


class SyncClient:
    def __init__(
        self,
        transport: Transport,
        *,
        budgets: Budgets = DEFAULT_BUDGETS,
        services: Mapping[str, ServiceEndpoint] | None = None,
        on_request: OnRequest | None = None,
        retry: Retry = DEFAULT_RETRY,
        optional: str = "server",
    ) -> None:
        """The options are SmartClient's."""
        self.smart = SmartClient(
            transport, budgets=budgets, services=services, on_request=on_request, retry=retry, optional=optional
        )
        self.loop = asyncio.new_event_loop()

    def query(self, query: str, dataset: DatasetSpec | str, *, name: str | None = None) -> SyncExecution:
        """Parse and plan (errors known before running are raised here)."""
        return SyncExecution(self.loop.run_until_complete(self.smart.prepare(query, dataset, name=name)), self.loop)

    def close(self) -> None:
        self.loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class SyncExecution:
    def __init__(self, execution: Execution, loop: asyncio.AbstractEventLoop) -> None:
        self.execution = execution
        self.loop = loop
        self.form = execution.form
        self.variables = execution.variables

    @property
    def requests(self) -> int:
        return self.execution.requests

    def explain(self) -> str:
        """The plan, one operator a line: what the client runs, and each server piece's query
        (the operators shipped to the workers are in its text)."""
        return self.execution.plan.explain()

    @property
    def bytes(self) -> int:
        return self.execution.bytes

    def solutions(self) -> Iterator[Row]:
        return self._iterate(self.execution.solutions())

    def boolean(self) -> bool:
        return self.loop.run_until_complete(self.execution.boolean())

    def triples(self) -> Iterator[Triple]:
        return self._iterate(self.execution.triples())

    def close(self) -> None:
        self.loop.run_until_complete(self.execution.aclose())

    def __enter__(self) -> SyncExecution:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _iterate(self, items: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self.loop.run_until_complete(anext(items))
                except StopAsyncIteration:
                    return
        finally:
            closing: Any = getattr(items, "aclose", None)
            if closing is not None:
                self.loop.run_until_complete(closing())
            self.close()
