"""The smart client's transport inside the gateway: each quantum is a task on
the queue, like any other, through the dispatcher (no HTTP hop), except a
piece's first quantum when the gateway runs it itself (first_quantum.py).

Tasks ask for rows as terms (ROW_FORMAT_TERMS), which the client's operators
and every result format start from, or, for a query that is one server piece
(`SubRequest.render`), written by the worker in the response's format, which
the endpoint splices in without reading a row; and for plans by value: the state then
stays in this process between quanta (no copy in Redis that could expire
while a slow reader holds the query back). The `next` tokens never leave the
gateway, so they are not signed: the saved plan as the in-process transport
keeps it (`plan_token`). A request no worker replied to is sent again as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace

from quanta.client.in_process import plan_token, token_plan
from quanta.client.transport import Cardinalities, QueryError, SubPage, SubRequest
from quanta.common.catalog import Dataset
from quanta.gateway.sparql_endpoint.first_quantum import FirstQuantum
from quanta.gateway.tasks import pages
from quanta.gateway.tasks.admission import QUERY_CLIENT, QUERY_TASKS
from quanta.gateway.tasks.dispatch import Answered, Dispatcher, Failed, ReplyTimeout, WrongReply
from quanta.queue.v1 import queue_pb2
from quanta.sparql.errors import ErrorKind

ROW_FORMATS = {
    "terms": queue_pb2.ROW_FORMAT_TERMS,
    "json": queue_pb2.ROW_FORMAT_JSON,
    "tsv": queue_pb2.ROW_FORMAT_TSV,
    "csv": queue_pb2.ROW_FORMAT_CSV,
    "xml": queue_pb2.ROW_FORMAT_XML,
}


class DispatcherTransport:
    """quanta.client's Transport over `Dispatcher.run`."""

    def __init__(
        self, dispatcher: Dispatcher, catalog: Mapping[str, Dataset], first: FirstQuantum | None = None
    ) -> None:
        self.dispatcher, self.catalog = dispatcher, catalog
        self.first = first  # runs a piece's first quantum here when it can (first_quantum.py)

    def cardinalities(self, dataset: str, graph: str | None) -> Cardinalities | None:
        """The file a first quantum runs on here, if this process opened it."""
        return None if self.first is None else self.first.stores.get((dataset, graph))

    async def named_graphs(self, dataset: str) -> list[str]:
        found = self.catalog.get(dataset)
        if found is None:
            raise QueryError(ErrorKind.UNKNOWN_DATASET, f"no dataset named {dataset!r}")
        return [iri for iri, _ in found.graphs]

    async def run(self, request: SubRequest) -> SubPage:
        tasks = QUERY_TASKS.get()
        if self.first is not None and (ran := self.first.run(request)) is not None:
            if tasks is not None:
                tasks.sent += 1  # the query's later tasks are continuations
            page, plan = ran
            return page if plan is None else replace(page, next=plan_token(plan))
        task = queue_pb2.Task(
            id=uuid.uuid4().hex, dataset=request.dataset, plan_mode=queue_pb2.PLAN_MODE_VALUE,
            rows=ROW_FORMATS[request.render or "terms"], graph=request.graph or "", columns=request.columns,
            partial=request.partial, whole=request.whole,
        )  # fmt: skip
        _input(task, request)
        # Not charged to the rate (the query was, when fair_use admitted it), but counted in its
        # client's share of the queue: the client fair_use admitted the query for. Its tasks after
        # the first may take the queue's reserve: refused, they would cut an answer under way.
        continuation = tasks is not None and tasks.sent > 0
        outcome = await self.dispatcher.run(QUERY_CLIENT.get(), task, charge=False, continuation=continuation)
        if tasks is not None and isinstance(outcome, Answered | Failed | ReplyTimeout | WrongReply):
            tasks.sent += 1  # admitted (a refused first task, sent again, is still a new query's)
        if isinstance(outcome, Answered):
            return await _page(outcome, request.render)
        if isinstance(outcome, Failed):
            e = outcome.error
            raise QueryError(
                outcome.kind, e.message or outcome.kind.title,
                line=e.line or None, column=e.column or None, operator=e.operator or None,
            )  # fmt: skip
        if isinstance(outcome, ReplyTimeout):
            message = f"no worker replied within {outcome.timeout_s:g} s"  # retried as it was: same text or plan
            raise QueryError(outcome.kind, message, retry_after_s=outcome.retry_after_s)
        if isinstance(outcome, WrongReply):
            raise QueryError(outcome.kind, "a worker answered with another task's reply")
        raise QueryError(outcome.kind, outcome.kind.title, retry_after_s=outcome.retry_after_s)


def _input(task: queue_pb2.Task, request: SubRequest) -> None:
    if request.query is not None:
        task.query = request.query
    else:
        task.plan = token_plan(request.next or "")


async def _page(answered: Answered, render: str | None) -> SubPage:
    page = answered.page
    done = page.WhichOneof("next") is None
    text = page.bindings_json if render == "json" else page.text
    return SubPage(
        variables=list(page.head),
        rows=[] if page.ask or render is not None else await pages.rows(page),
        text=text,
        next=None if done else plan_token(page.plan),
        boolean=page.boolean if page.ask and done else None,
        stats=pages.stats(page, "value", answered.round_trip_ms),
        bytes=page.ByteSize(),
    )
