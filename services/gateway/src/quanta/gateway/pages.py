"""Turn a worker's Reply into the HTTP answer: a page (bytes spliced together) or a problem.

The bindings are already the SPARQL JSON "bindings" array, as bytes; parsing
and re-serializing them would cost more than the rest of the round trip, so
the page is assembled around them.
"""

from __future__ import annotations

import json

from quanta.gateway.problems import Problem
from quanta.queue.v1 import queue_pb2

# Worker error kinds (queue.proto, Error.kind) -> problem slugs; anything else is internal.
WORKER_ERRORS = {
    "syntax-error",
    "unsupported-operator",
    "invalid-plan",
    "dataset-mismatch",
    "plan-expired",
    "unknown-dataset",
    "dead-letter",
}


def worker_problem(error: queue_pb2.Error) -> Problem:
    slug = error.kind if error.kind in WORKER_ERRORS else "internal"
    if slug == "syntax-error":
        return Problem(slug, error.message, line=error.line, column=error.column)
    if slug == "unsupported-operator":
        return Problem(slug, error.message, operator=error.operator)
    if slug == "internal":
        # Don't leak a worker's internals to clients; its logs have the details.
        return Problem(slug, "the worker failed to run this quantum", worker_error=error.kind or None)
    return Problem(slug, error.message)


def stats(page: queue_pb2.Page, plan: str | None, round_trip_ms: float) -> dict[str, object]:
    s = page.stats
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
    }


def page_body(page: queue_pb2.Page, next_token: str | None, stats: dict[str, object]) -> bytes:
    """The 200 body: `{"head", "results": {"bindings"}, "next", "stats"}`; a finished ASK has `boolean`, no results."""
    tail = b',"next":' + (b'"' + next_token.encode() + b'"' if next_token else b"null")
    tail += b',"stats":' + json.dumps(stats, separators=(",", ":")).encode() + b"}"
    if page.ask:
        if next_token is None:
            return b'{"head":{},"boolean":' + (b"true" if page.boolean else b"false") + tail
        return b'{"head":{},"results":{"bindings":[]}' + tail
    head = json.dumps(list(page.head), separators=(",", ":")).encode()
    return b'{"head":{"vars":' + head + b'},"results":{"bindings":' + (page.bindings_json or b"[]") + b"}" + tail
