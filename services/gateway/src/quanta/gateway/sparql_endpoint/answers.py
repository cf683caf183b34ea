"""What each query form writes into a streamed response: SELECT's solutions
and ASK's boolean in a results format, CONSTRUCT's and DESCRIBE's triples in
a graph format (quanta.sparql's writers, one per response).

A SELECT that is one server query (`Execution.rendered`) is written by the
workers: each page comes in the response's format and is spliced between the
writer's head and end, so the gateway handles no row or term of it. Any other
answer comes in batches of rows (a page, an operator's output), rendered
here a batch at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from quanta.client.smart import Execution
from quanta.gateway.sparql_endpoint.streaming import Output, Produce, Render, next_or_flush
from quanta.sparql import graphs, results


def producer(execution: Execution, fmt: str) -> tuple[Produce, Render]:
    """How to write `execution`'s answer in `fmt` (a key of results.FORMATS
    for SELECT and ASK, of graphs.GRAPH_FORMATS otherwise), and how rows render."""
    if execution.form == "ask":
        ask = results.writer(fmt)

        async def boolean(out: Output) -> None:
            out.text(ask.boolean(await execution.boolean()))

        return boolean, ask.rows
    if execution.form == "select":
        table = results.writer(fmt)
        head = table.head(execution.variables)
        pages = execution.rendered(fmt)
        if pages is not None:
            return spliced(head, pages, fmt == "json", table.end), table.rows
        return stream(head, execution.batches(), table.end), table.rows
    graph = graphs.graph_writer(fmt)
    return stream(graph.head(), execution.batches(), graph.end), graph.triples


def stream(head: str, batches: AsyncIterator[list[Any]], end: Callable[[], str]) -> Produce:
    """Writes `head`, the rows of each batch (sent when the query is about to wait, or when many), then `end()`."""

    async def produce(out: Output) -> None:
        out.text(head)
        while True:
            try:
                batch = await next_or_flush(batches, out.flush)
            except StopAsyncIteration:
                break
            out.batch(batch)
            if out.full:
                await out.flush()
        out.text_after_rows(end)  # a writer's end depends on the rows it has written (Turtle's last " .")

    return produce


def spliced(head: str, pages: AsyncIterator[bytes], comma: bool, end: Callable[[], str]) -> Produce:
    """Writes `head`, each page's rows as the worker wrote them, then `end()`.
    A page goes out while the next one is asked for (`next_or_flush`: once its
    task is queued), so the workers and the gateway work at once. `comma`:
    JSON, whose pages are arrays of which the elements are joined by one."""

    async def produce(out: Output) -> None:
        out.text(head)
        first = True
        while True:
            try:
                text = await next_or_flush(pages, out.flush)
            except StopAsyncIteration:
                break
            if comma:  # a JSON array: its elements go between the writer's brackets
                text = text[1:-1]
                if text and not first:
                    out.results(b",")
            if text:
                out.results(text)
                first = False
        out.text(end())

    return produce
