"""The progress stream: a query's answer and its quanta as Server-Sent Events,
one more format of the SPARQL endpoint (`Accept: text/event-stream`), for the
query page (docs/web.md) or any client that wants to watch a query run.

    event: head     data: {"form":"select","vars":["s","o"]}
    event: quantum  data: {"quanta":12,"status":"ok","worker":"w-1","results":40,"quantum_ms":2.1,"elapsed_ms":180.4,
                           "progress":0.31,"eta_ms":398.2,"partial":false,"whole":false}
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

`progress` and `eta_ms` are those of the query's *driving piece*: the smart
client may split a query into several server pieces, and the one that drives
it is the first, outermost one: the leftmost server piece of the client's
plan (what an OPTIONAL's bind join, a sort or a grouping reads their rows
from; a query that is one piece drives itself). `progress` is the fraction
of that piece done that its last quantum reported (the workers' estimate,
quanta.engine.progress), `eta_ms` the time it has left at its pace so far
(elapsed * (1 - progress) / progress, elapsed since its first request, less
the time since its last quantum); both null until it has reported, or when
no piece drives the query (its leftmost operand runs in the gateway). What
the client does after that piece ends (the rest of a sort's output, say) is
not counted. When the piece completes, each of its quanta's estimate is
compared with the fraction of the piece's time elapsed at that quantum
(`quanta_progress_estimate_error`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quanta.client.ops.base import Op
from quanta.client.ops.remote import Remote, Whole
from quanta.client.requester import RequestEvent
from quanta.client.smart import Execution
from quanta.gateway import metrics
from quanta.gateway.sparql_endpoint import answers
from quanta.gateway.sparql_endpoint.streaming import Output, Produce, Render
from quanta.gateway.tasks.pages import time_left_ms
from quanta.sparql.results import json_bindings_text

GRAPH_VARIABLES = ("subject", "predicate", "object")
MAX_SAMPLES = 1024  # the driving piece's quanta kept for the estimate's error (every other one past it, and so on)


@dataclass(frozen=True, slots=True)
class QuantumReport:
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
        self.driver = Driver()

    def follow(self, execution: Execution) -> None:
        """Watch the piece that drives `execution` (before it sends anything)."""
        self.driver.plan = execution.plan.root

    def on_request(self, event: RequestEvent) -> None:
        if event.status == "ok":
            self.quanta += 1
            self.driver.on_page(event)
        if self.out is None:  # not streaming events (another format), or not yet
            return
        stats = event.stats
        fraction, eta_ms = self.driver.now()
        data = {
            "quanta": self.quanta, "status": event.status, "worker": stats.get("worker"),
            "results": stats.get("results"), "quantum_ms": stats.get("quantum_ms"), "elapsed_ms": self.elapsed_ms(),
            "progress": fraction, "eta_ms": eta_ms,
            # the piece's GROUP BY, DISTINCT or top-k ran on the worker (partial answers); every
            # operator of the query did (run whole: "unfinished" when the worker could not)
            "partial": event.request is not None and event.request.partial,
            "whole": event.request is not None and event.request.whole,
        }  # fmt: skip
        self.out.row(QuantumReport(json.dumps(data, separators=(",", ":"))))

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
                if not isinstance(item, QuantumReport):
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


def driving_piece(op: Op) -> str | None:
    """The query text of the plan's leftmost server piece (its outer loop), or None when the
    leftmost operand runs in the gateway. A query sent whole first is driven by its pieces (the
    whole try is one request), None until they are planned."""
    while not isinstance(op, Remote):
        if isinstance(op, Whole):
            if op.pieces is None:
                return None
            op = op.pieces
            continue
        children = op.children()
        if not children:
            return None
        op = children[0]
    return op.text


class Driver:
    """The driving piece's pages, followed by their `next` tokens: its last fraction done, the time
    it has left, and at its end the error of each quantum's estimate (a Prometheus histogram)."""

    def __init__(self) -> None:
        self.plan: Op | None = None  # the query's plan, where the driving piece is looked for
        self.text: str | None = None  # the piece's query text (None: no piece drives the query)
        self.expected: str | None = None  # the token its next page is asked with, once it started
        self.started = 0.0  # when its first request was sent (perf_counter)
        self.done = False
        self.fraction: float | None = None
        self.eta: tuple[float, float] | None = None  # (time left in ms, when it was estimated)
        self.samples: list[tuple[float, float]] = []  # (seconds since it started, fraction), per quantum
        self.stride = 1  # keep one quantum in `stride` (doubled each time the samples fill up)
        self.seen = 0

    def on_page(self, event: RequestEvent) -> None:
        request = event.request
        if self.text is None and self.plan is not None:  # a query sent whole plans its pieces late
            self.text = driving_piece(self.plan)
        if self.text is None or self.done or request is None:
            return
        if self.expected is None:
            if request.query != self.text:  # its first page (or that request sent again)
                return
            self.started = time.perf_counter() - event.elapsed_s
        elif request.next != self.expected:
            return
        now = time.perf_counter()
        elapsed = now - self.started
        if event.next is None:
            self.done, self.fraction, self.eta = True, 1.0, (0.0, now)
            self._observe(elapsed)
            return
        self.expected = event.next
        reported = event.stats.get("progress")
        fraction = min(max(float(reported), 0.0), 1.0) if isinstance(reported, int | float) else None
        self.fraction = fraction
        left = time_left_ms(fraction, elapsed * 1000)
        self.eta = None if left is None else (left, now)
        if fraction is not None:
            self._sample(elapsed, fraction)

    def now(self) -> tuple[float | None, float | None]:
        """(fraction done, time left in ms now), each None when not known."""
        fraction = None if self.fraction is None else round(self.fraction, 4)
        if self.eta is None:
            return fraction, None
        left, at = self.eta
        return fraction, round(max(0.0, left - (time.perf_counter() - at) * 1000), 1)

    def _sample(self, elapsed: float, fraction: float) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.samples.append((elapsed, fraction))
        if len(self.samples) >= MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.stride *= 2

    def _observe(self, total: float) -> None:
        if total <= 0:
            return
        for at, fraction in self.samples:
            metrics.PROGRESS_ERROR.observe(fraction - min(at / total, 1.0))
        self.samples = []
