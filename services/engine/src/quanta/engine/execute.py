"""One quantum of work: start or resume a plan, run it until the quantum (or
the page) is full, suspend it. This is what a worker does per task."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from quanta.engine.context import Mapping, _unbounded
from quanta.engine.plan import ASK, Plan
from quanta.engine.quantum import Quantum, QuantumExpired
from quanta.engine.sparql.compile import compile_query
from quanta.engine.storage import TripleStore


@dataclass(slots=True)
class Stats:
    """Milliseconds, except plan_bytes. Parse/resume/suspend are not part of
    the quantum (as in the paper)."""

    parse_ms: float = 0.0
    resume_ms: float = 0.0
    quantum_ms: float = 0.0
    suspend_ms: float = 0.0
    overshoot_ms: float = 0.0
    plan_bytes: int = 0


@dataclass(slots=True)
class Page:
    head: list[str]
    rows: list[tuple[str | None, ...]]  # one dictionary-syntax term per head variable, None = unbound
    form: int
    next: bytes | None  # the saved plan; None when the query is complete
    stats: Stats = field(default_factory=Stats)

    @property
    def boolean(self) -> bool:
        """ASK: whether a solution exists (meaningful once `next` is None)."""
        return bool(self.rows)


def execute(
    store: TripleStore,
    *,
    query: str | None = None,
    saved: bytes | None = None,
    quantum_seconds: float | None,
    max_results: int | None = None,
) -> Page:
    """Run one quantum of a new query (`query`) or a suspended one (`saved`)."""
    with collection_paused():
        return _execute(store, query, saved, quantum_seconds, max_results)


def _execute(
    store: TripleStore, query: str | None, saved: bytes | None, quantum_seconds: float | None, max_results: int | None
) -> Page:
    stats = Stats()
    quantum = Quantum(quantum_seconds)
    start = time.perf_counter()
    if saved is not None:
        plan = Plan.load(saved, store, quantum)
        stats.resume_ms = _ms(start)
    else:
        assert query is not None
        plan = compile_query(query, store)
        plan.ctx.quantum = quantum
        stats.parse_ms = _ms(start)
    rows, done = run(plan, quantum, max_results)
    stats.quantum_ms = _ms(start) - stats.resume_ms - stats.parse_ms
    stats.overshoot_ms = quantum.overshoot * 1000
    saved_next = None
    if not done:
        before = time.perf_counter()
        saved_next = plan.save()
        stats.suspend_ms = _ms(before)
        stats.plan_bytes = len(saved_next)
    page = Page(plan.head, decode(plan, rows), plan.form, saved_next, stats)
    if saved_next is not None:
        plan.release()
    return page


def decode(plan: Plan, rows: list[Mapping]) -> list[tuple[str | None, ...]]:
    """Project and turn ids into term strings: the edge where strings appear."""
    string = plan.ctx.terms.string
    projection = plan.projection
    return [tuple(string(m[i]) if m[i] else None for i in projection) for m in rows]


def run(plan: Plan, quantum: Quantum, max_results: int | None = None) -> tuple[list[Mapping], bool]:
    """Pull mappings until the plan is exhausted (True) or suspended (False)."""
    rows: list[Mapping] = []
    limited = max_results is not None and plan.form != ASK
    plan.ctx.wanted = (lambda: max_results - len(rows)) if limited else _unbounded  # type: ignore[operator]
    quantum.start()
    try:
        for mapping in plan.mappings():
            rows.append(mapping)
            if limited and len(rows) >= max_results:  # type: ignore[operator]
                return rows, False
    except QuantumExpired:
        return rows, False
    return rows, True


@contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic garbage collector waits while a quantum is resumed, run and
    suspended: operators allocate only acyclic tuples, and a full collection
    over the previous page's rows stalled a clock check or a resume by up to
    ~20 ms. It runs between quanta instead."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000
