"""The progress stream: a query's answer and its quanta as Server-Sent Events,
one more format of the SPARQL endpoint (`Accept: text/event-stream`), for the
query page (docs/web.md) or any client that wants to watch a query run.

    event: head     data: {"form":"select","vars":["s","o"]}
    event: quantum  data: {"quanta":12,"status":"ok","worker":"w-1","results":40,"quantum_ms":2.1,"elapsed_ms":180.4}
    event: results  data: [{"s":{"type":"uri","value":"..."},...},...]    (SPARQL JSON bindings)
    event: boolean  data: true                                           (ASK)
    event: end      data: {"quanta":130,"elapsed_ms":2301.5}
    event: error    data: {"type":"https://quanta.dev/problems/...","title":"...",...}

It is written by the endpoint's ResultStream like any format: a query's
quanta reach the Output as items among its rows (`Progress.on_request`, the
query's own hook), so they leave in order, as soon as the query is about to
wait. A quantum counts as something to send: the response starts with the
first quantum rather than the first result. CONSTRUCT and DESCRIBE triples
are bindings of `subject`, `predicate`, `object` (as YASR shows graphs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quanta.client.requester import RequestEvent
from quanta.client.smart import Execution
from quanta.gateway import answers
from quanta.gateway.streaming import Output, Produce, Render
from quanta.sparql.results import json_bindings_text

GRAPH_VARIABLES = ("subject", "predicate", "object")


@dataclass(frozen=True, slots=True)
class Quantum:
    """A quantum's event, queued among the rows."""

    data: str


def event(name: str, data: Any) -> str:
    """One Server-Sent Event; `data` is JSON (compact: no line breaks), or text that already is."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"event: {name}\ndata: {text}\n\n"


class Progress:
    """One query's progress: its `on_request` hook counts the quanta and, once
    the stream writes (`producer`), adds one `quantum` event for each."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.quanta = 0  # pages answered (retries are events, not quanta)
        self.out: Output | None = None

    def on_request(self, event: RequestEvent) -> None:
        if event.status == "ok":
            self.quanta += 1
        if self.out is None:  # not streaming events (another format), or not yet
            return
        stats = event.stats
        data = {
            "quanta": self.quanta, "status": event.status, "worker": stats.get("worker"),
            "results": stats.get("results"), "quantum_ms": stats.get("quantum_ms"), "elapsed_ms": self.elapsed_ms(),
        }  # fmt: skip
        self.out.row(Quantum(json.dumps(data, separators=(",", ":"))))

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 1)

    def producer(self, execution: Execution) -> tuple[Produce, Render]:
        """How the events of `execution` are written, as answers.producer does for the other formats."""
        if execution.form == "ask":

            async def boolean(out: Output) -> None:
                self.out = out
                out.text(event("head", {"form": "ask", "vars": []}))
                out.text(event("boolean", await execution.boolean()))
                out.text(self._end())

            return boolean, self._render(())
        variables: Sequence[str] = execution.variables if execution.form == "select" else GRAPH_VARIABLES
        head = event("head", {"form": execution.form, "vars": list(variables)})
        stream = answers.stream(head, execution.batches(), self._end)

        async def produce(out: Output) -> None:
            self.out = out
            await stream(out)

        return produce, self._render(variables)

    def failure(self, problem: dict[str, Any]) -> str:
        """A failure after the stream started, said in it (the response still ends properly)."""
        return event("error", problem)

    def _end(self) -> str:
        return event("end", {"quanta": self.quanta, "elapsed_ms": self.elapsed_ms()})

    @staticmethod
    def _render(variables: Sequence[str]) -> Render:
        def render(items: Sequence[Any]) -> str:
            texts: list[str] = []
            rows: list[Any] = []
            for item in items:
                if not isinstance(item, Quantum):
                    rows.append(item)
                    continue
                if rows:
                    texts.append(event("results", json_bindings_text(variables, rows)))
                    rows = []
                texts.append(event("quantum", item.data))
            if rows:
                texts.append(event("results", json_bindings_text(variables, rows)))
            return "".join(texts)

        return render
