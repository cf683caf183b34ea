"""One quantum of work: start or resume a plan, run it until the quantum (or
the page) is full, suspend it. This is what a worker does per task.

A page ends with the quantum, or when it holds `max_bytes` of JSON results
(measured on its own rows from the first one, so that one huge row ends its
page), or `max_results` rows.
Its rows stay term ids until someone reads them: `QuantumPage.text()` writes them
in a results format straight from the ids on the native store."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from quanta.engine import progress
from quanta.engine.context import _unbounded
from quanta.engine.plan import ASK, Plan
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum, QuantumExpired
from quanta.engine.storage import TripleStore
from quanta.native._core import PageTooLarge
from quanta.sparql.collector import collection_paused
from quanta.sparql.errors import InvalidRequest, StateTooLarge, Unfinished
from quanta.sparql.results import rows_text
from quanta.sparql.term_rows import Row
from quanta.sparql.term_table import IdMapping
from quanta.sparql.xml_text import quoteattr


@dataclass(slots=True)
class QuantumStats:
    """Milliseconds, except plan_bytes and progress. Parse/resume/suspend are not part of
    the quantum (as in the paper)."""

    parse_ms: float = 0.0
    resume_ms: float = 0.0
    quantum_ms: float = 0.0
    suspend_ms: float = 0.0
    overshoot_ms: float = 0.0
    plan_bytes: int = 0
    progress: float = 0.0  # the estimated fraction of the query done (quanta.engine.progress); 1.0 when complete


class QuantumPage:
    """One quantum's results. `rows` are decoded (ids to term strings) when
    first read; `text()` may skip that step entirely."""

    __slots__ = ("_decode", "_render", "_rows", "count", "form", "head", "next", "stats")

    def __init__(
        self,
        head: list[str],
        rows: list[Row] | None,
        form: int,
        next: bytes | None,  # the saved plan; None when the query is complete
        stats: QuantumStats | None = None,
        *,
        count: int | None = None,
        decode: Callable[[], list[Row]] | None = None,
        render: Callable[[str], bytes] | None = None,
    ) -> None:
        self.head = head
        self._rows = rows
        self.form = form
        self.next = next
        self.stats = stats if stats is not None else QuantumStats()
        self.count = len(rows) if rows is not None else (count or 0)
        self._decode = decode
        self._render = render

    @property
    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = self._decode() if self._decode is not None else []
        return self._rows

    @property
    def boolean(self) -> bool:
        """ASK: whether a solution exists (meaningful once `next` is None)."""
        return self.count > 0

    def bindings_json(self) -> bytes:
        """The SPARQL JSON "bindings" array of the rows."""
        return self.text("json")

    def text(self, fmt: str) -> bytes:
        """The rows in results format `fmt` (`quanta.sparql.results.rows_text`)."""
        if self._rows is None and self._render is not None:
            return self._render(fmt)
        return rows_text(fmt, self.head, self.rows).encode()


def execute(
    store: TripleStore,
    *,
    query: str | None = None,
    saved: bytes | None = None,
    quantum_seconds: float | None,
    max_results: int | None = None,
    max_bytes: int | None = None,
    columns: Sequence[str] = (),
    partial: bool = False,
    whole: bool = False,
    cpu_clock: bool = False,
) -> QuantumPage:
    """Run one quantum of a new query (`query`) or a suspended one (`saved`).
    `columns`: the page's head, some of the query's variables in any order
    (empty: the query's own head; InvalidRequest if one is not there).
    `partial`: a new query's DISTINCT, or GROUP BY with COUNT(*), is answered
    per quantum, for the client to merge (`compile_query`).
    `whole`: a new query is run whole, every operator here (`compile_query`), suspended and
    resumed like any other (what its operators gathered is state), or raises Unfinished when
    it holds more than a plan run whole may (none of its work kept).
    `cpu_clock`: the quantum of a plan run whole is the thread's CPU time, not wall time (a
    worker's: on a busy machine the wall clock would cut it into more quanta exactly when
    each one costs most).
    The cyclic collector waits meanwhile (operators make only acyclic tuples):
    a collection over the previous page's rows stalled a clock check or a
    resume by up to ~20 ms; it runs between quanta instead."""
    with collection_paused():
        quantum = Quantum(quantum_seconds)
        return _execute(store, query, saved, quantum, max_results, max_bytes, columns, partial, whole, cpu_clock)


def _execute(
    store: TripleStore,
    query: str | None,
    saved: bytes | None,
    quantum: Quantum,
    max_results: int | None,
    max_bytes: int | None,
    columns: Sequence[str],
    partial: bool,
    whole: bool,
    cpu_clock: bool,
) -> QuantumPage:
    stats = QuantumStats()
    start = time.perf_counter()
    if saved is not None:
        plan = Plan.load(saved, store, quantum)
        stats.resume_ms = _ms(start)
    else:
        assert query is not None
        plan = compile_query(query, store, partial, whole)
        plan.ctx.quantum = quantum
        stats.parse_ms = _ms(start)
    whole = whole or plan.whole  # a resumed plan says
    if whole and cpu_clock:
        quantum.on_cpu()
    head, decoder, renderer = edge(plan, columns)  # before the work: a wrong column fails at once
    try:
        rows, done = run(plan, quantum, max_results, max_bytes, render=renderer)
    except StateTooLarge as error:
        if whole:
            raise Unfinished(str(error)) from None
        raise
    stats.quantum_ms = _ms(start) - stats.resume_ms - stats.parse_ms
    stats.overshoot_ms = quantum.overshoot * 1000
    saved_next = None
    if not done:
        before = time.perf_counter()
        saved_next = _saved(plan)
        stats.suspend_ms = _ms(before)
        stats.plan_bytes = len(saved_next)
        stats.progress = progress.estimate(plan)  # after saving: a native plan's state is then exact
    else:
        stats.progress = 1.0
    page = QuantumPage(
        head,
        None,
        plan.form,
        saved_next,
        stats,
        count=len(rows),
        decode=lambda: decoder(rows),
        render=lambda fmt: renderer(fmt, rows),
    )
    if saved_next is not None:
        plan.release(saved_next)
    return page


def _saved(plan: Plan) -> bytes:
    """The plan suspended; Unfinished for a plan run whole with an operator that has no saved
    form (its work is then the client's)."""
    try:
        return plan.save()
    except ValueError as error:
        if plan.whole:
            raise Unfinished(f"a plan run whole that cannot be saved: {error}") from None
        raise


Renderer = Callable[[str, Sequence[IdMapping]], bytes]  # (format, rows) -> the rows in that results format


Decoder = Callable[[Sequence[IdMapping]], list[Row]]  # rows of ids -> rows of term strings


def edge(plan: Plan, columns: Sequence[str] = ()) -> tuple[list[str], Decoder, Renderer]:
    """Where ids become strings: the head (`columns`, else the plan's), a
    decoder of rows, and a writer of results straight from the ids (natively).
    Both keep what they need of the plan (its term table only grows), so they
    work after it is pooled."""
    projection, terms, store = list(plan.projection), plan.ctx.terms, plan.ctx.store
    head = plan.head
    if columns:
        try:
            projection = [projection[head.index(name)] for name in columns]
        except ValueError:
            raise InvalidRequest(f"columns {list(columns)} are not all in the query's head {head}") from None
        head = list(columns)
    keys = {
        "json": [(json.dumps(name) + ":").encode() for name in head],
        "xml": [f"<binding name={quoteattr(name)}>".encode() for name in head],
    }
    blank = [b""] * len(head)
    return (
        head,
        _bounded(lambda rows: store.decode_rows(rows, projection, terms.extra)),
        _bounded(lambda fmt, rows: store.render(fmt, keys.get(fmt, blank), rows, projection, terms.extra)),
    )


P = ParamSpec("P")
T = TypeVar("T")


def _bounded(write: Callable[P, T]) -> Callable[P, T]:
    """The native writers refuse a page whose computed terms pass 256 MiB (one literal an
    expression built, projected into thousands of columns): the query's doing, a 422."""

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return write(*args, **kwargs)
        except PageTooLarge as error:
            from quanta.sparql.expr_values import ExpressionLimit  # see quanta.engine.operators

            raise ExpressionLimit(f"{error}: the query projects too many long computed terms") from None

    return run


def decode(plan: Plan, rows: Sequence[IdMapping]) -> list[Row]:
    """Project and turn ids into term strings: the edge where strings appear."""
    return edge(plan)[1](rows)


class PageLimit:
    """When a page is full: at `max_results` rows, or once it holds about
    `max_bytes` of JSON. Bytes are measured from the first row: at rows 1,
    2, 4, 8... (each time the page doubles), on the rows since the last
    measure (the last SAMPLE of them when there are more). A page is full as
    soon as the rows measured reach `max_bytes` by themselves (one huge row
    ends its page), or the page's rows at the measured average would."""

    SAMPLE = 16

    def __init__(
        self, rows: Sequence[IdMapping], max_results: int | None, max_bytes: int | None, render: Renderer
    ) -> None:
        self.rows = rows
        self.cap: float = max_results if max_results is not None else math.inf
        self.max_bytes = max_bytes
        self.by_bytes: float = math.inf
        self.checkpoint: float = 1 if max_bytes is not None else math.inf
        self.measured = (0, 0)  # rows, bytes
        self.seen = 0  # rows before the last measure
        self.render = render

    def limit(self) -> float:
        """Rows after which `full` must be asked again."""
        return min(self.cap, self.by_bytes, self.checkpoint)

    def wanted(self) -> int | None:
        """How many more rows the page takes before the next question."""
        limit = self.limit()
        return None if limit == math.inf else max(0, int(limit) - len(self.rows))

    def full(self) -> bool:
        n = len(self.rows)
        if n >= self.checkpoint and self.max_bytes is not None:
            sample = self.rows[max(self.seen, n - self.SAMPLE) : n]
            size = len(self.render("json", sample))
            rows, total = self.measured[0] + len(sample), self.measured[1] + size
            self.measured, self.seen = (rows, total), n
            # When the rows measured reach the budget by themselves: rows * max_bytes / total <= rows <= n.
            self.by_bytes = max(1, int(self.max_bytes * rows / max(total, 1)))
            self.checkpoint = 2 * n
        return n >= min(self.cap, self.by_bytes)


def run(
    plan: Plan, quantum: Quantum, max_results: int | None = None, max_bytes: int | None = None, *,
    render: Renderer | None = None,
) -> tuple[Sequence[IdMapping], bool]:  # fmt: skip
    """Run until the plan is exhausted (True) or suspended (False): the quantum
    expired or the page is full. The rows: a buffer of ids (no Python object per row).
    `render` writes the rows the page's bytes are measured on (the plan's head, else)."""
    if plan.form == ASK:
        max_results = max_bytes = None
    rows = plan.root.rows()
    page = PageLimit(rows, max_results, max_bytes, render or edge(plan)[2])
    plan.ctx.wanted = page.wanted if page.limit() != math.inf else _unbounded
    limit = page.limit()
    quantum.start()
    try:
        for _ in plan.root.batches(rows):  # a batch at a time: its size is what the page wants
            if len(rows) >= limit:
                if page.full():
                    return rows, False
                limit = page.limit()
    except QuantumExpired:
        return rows, False
    finally:
        quantum.stop()
    return rows, True


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def warm_up(store: TripleStore) -> None:
    """Run one small query: the first one in a process pays for the parser's grammar and the
    compiler's imports (a second or more on a busy machine), which would otherwise count against
    the first task's stall limit (a worker's) or the first query's time (the gateway's). It has a
    FILTER: the expression modules are imported only by a query that needs them."""
    execute(store, query="ASK { ?s ?p ?o FILTER(?o != ?s) }", quantum_seconds=None)
