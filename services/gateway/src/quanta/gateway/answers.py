"""What each query form writes into a streamed response: SELECT's solutions
and ASK's boolean in a results format, CONSTRUCT's and DESCRIBE's triples in
a graph format (quanta.sparql's writers, one per response)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from quanta.client.smart import Execution
from quanta.gateway.streaming import Output, Produce, Render, next_or_flush
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
        return stream(table.head(execution.variables), execution.solutions(), table.end), table.rows
    graph = graphs.graph_writer(fmt)
    return stream(graph.head(), execution.triples(), graph.end), graph.triples


def stream(head: str, items: AsyncIterator[Any], end: Callable[[], str]) -> Produce:
    """Writes `head`, each item as a row (sent when the query is about to wait, or when many), then `end()`."""

    async def produce(out: Output) -> None:
        out.text(head)
        while True:
            try:
                item = await next_or_flush(items, out.flush)
            except StopAsyncIteration:
                break
            out.row(item)
            if out.full:
                await out.flush()
        out.text_after_rows(end)  # a writer's end depends on the rows it has written (Turtle's last " .")

    return produce
