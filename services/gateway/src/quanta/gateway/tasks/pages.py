"""A worker's page, read: as the /v1 route's answer (bytes spliced together),
or as rows of terms (a task sent with ROW_FORMAT_TERMS).

For /v1 the bindings are already the SPARQL JSON "bindings" array, as bytes;
parsing and re-serializing them would cost more than the rest of the round
trip, so the page is assembled around them. Rows of terms are what any
other output format (`quanta.sparql.results`, `.graphs`) or a client-side
plan starts from.
"""

from __future__ import annotations

import json

from quanta.client.budgets import DEFAULT_BUDGETS
from quanta.client.ops.base import Pacer
from quanta.queue.v1 import queue_pb2
from quanta.sparql import term_rows
from quanta.sparql.term_rows import Row


async def rows(page: queue_pb2.Page) -> list[Row]:
    """The page's solutions as dictionary-syntax terms, one per head variable
    (None: unbound). Raises ValueError on rows that do not fit the head.
    Decoded a slice at a time, the event loop handed back between slices as
    the smart client's operators hand it back (`Pacer`: every SLICE_S of work):
    a page of 100,000 rows, or of a few huge terms, holds no other request."""
    pacer = Pacer(DEFAULT_BUDGETS.yield_rows)
    out: list[Row] = []
    for part in term_rows.slices(page.rows.terms, page.rows.cells, len(page.head), page.results):
        out += part
        await pacer.tick(len(part))
    return out


def stats(
    page: queue_pb2.Page, plan: str | None, round_trip_ms: float, elapsed_ms: float | None = None
) -> dict[str, object]:
    """The page's stats as /v1 shows them. `elapsed_ms`: the service's time on the query so far, this
    page's round trip included (None: not known), from which the time left is estimated."""
    s = page.stats
    fraction = 1.0 if page.WhichOneof("next") is None else min(max(s.progress, 0.0), 1.0)
    return {
        "queue_wait_ms": round(s.queue_wait_ms, 3),
        "parse_ms": round(s.parse_ms, 3),
        "resume_ms": round(s.resume_ms, 3),
        "quantum_ms": round(s.quantum_ms, 3),
        "suspend_ms": round(s.suspend_ms, 3),
        "overshoot_ms": round(s.overshoot_ms, 3),
        "plan_bytes": s.plan_bytes,
        "worker": s.worker,
        "results": page.results,
        "plan": plan,
        "round_trip_ms": round(round_trip_ms, 3),
        "progress": round(fraction, 6),
        "eta_ms": time_left_ms(fraction, elapsed_ms),
    }


def time_left_ms(fraction: float | None, elapsed_ms: float | None) -> float | None:
    """The time left at the pace so far, `elapsed * (1 - f) / f`; None when the fraction done is 0
    or not known, or the elapsed time is not known."""
    if fraction is None or elapsed_ms is None or fraction <= 0.0:
        return None
    return round(max(0.0, elapsed_ms * (1.0 - min(fraction, 1.0)) / fraction), 1)


def page_body(page: queue_pb2.Page, next_token: str | None, stats: dict[str, object]) -> bytes:
    """The 200 body: `{"head", "results": {"bindings"}, "next", "stats"}`; a finished ASK has `boolean`, no results.
    Joined once: the bindings may be a megabyte, and each `+` would copy them again."""
    tail = (
        b',"next":',
        b'"' + next_token.encode() + b'"' if next_token else b"null",
        b',"stats":',
        json.dumps(stats, separators=(",", ":")).encode(),
        b"}",
    )
    if page.ask:
        if next_token is None:
            return b"".join((b'{"head":{},"boolean":', b"true" if page.boolean else b"false", *tail))
        return b"".join((b'{"head":{},"results":{"bindings":[]}', *tail))
    head = json.dumps(list(page.head), separators=(",", ":")).encode()
    bindings = page.bindings_json or b"[]"
    return b"".join((b'{"head":{"vars":', head, b'},"results":{"bindings":', bindings, b"}", *tail))
