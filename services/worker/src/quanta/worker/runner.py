"""Run one task: one quantum of the engine, turned into a Reply."""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
import traceback
from collections.abc import Iterator, Mapping
from types import FrameType

import redis

from quanta.common import plans
from quanta.common.catalog import Dataset
from quanta.engine.execute import QuantumPage, execute
from quanta.engine.plan import ASK
from quanta.engine.storage import TripleStore
from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql import term_rows
from quanta.sparql.errors import (
    ErrorKind,
    InvalidPlan,
    PlanExpired,
    QuantaError,
    QuerySyntaxError,
    UnknownDataset,
    UnknownGraph,
    UnsupportedQuery,
)
from quanta.worker.stalls import StallRecorder

log = logging.getLogger("quanta.worker")

TEXT_FORMATS = {q.ROW_FORMAT_TSV: "tsv", q.ROW_FORMAT_CSV: "csv", q.ROW_FORMAT_XML: "xml"}


class Runner:
    """Holds the open datasets; `run` never raises for a bad task: every
    failure becomes an error reply the client can act on."""

    def __init__(
        self,
        datasets: Mapping[str, Dataset],
        stores: Mapping[str, TripleStore],
        client: redis.Redis,
        name: str,
        graphs: Mapping[str, Mapping[str, TripleStore]] | None = None,
        stall_s: float | None = None,
        recorder: StallRecorder | None = None,
    ):
        self.datasets = datasets
        self.stores = stores  # each dataset's default graph
        self.graphs = graphs or {}  # each dataset's named graphs, by IRI
        self.redis = client
        self.name = name
        self.stall_s = stall_s  # the watchdog's limit on one task's engine work (None: none)
        self.recorder = recorder  # the watchdog's second hand: counts a stall against the task, ends the worker

    def run(self, task: q.Task) -> tuple[q.Reply, QuantumPage | None]:
        started = time.time()
        try:
            dataset = self.datasets.get(task.dataset)
            if dataset is None:
                raise UnknownDataset(f"no dataset named {task.dataset!r}")
            store = self.store(dataset, task.graph)
            saved = self._saved(task)  # Redis's wait is bounded by its own timeout: not the watchdog's
            with watchdog(None if dataset.quantum_ms == math.inf else self.stall_s, task.id, self.recorder):
                page = self._execute(task, dataset, store, saved)
                reply = self._reply(task, page)
        except QuantaError as e:
            return failure(task, e), None
        if page.next is not None:
            if by_reference(task.plan_mode, dataset, len(page.next)):
                reply.page.plan_ref = plans.keep(self.redis, task, page.next)
            else:
                reply.page.plan = page.next
        s = page.stats
        reply.page.stats.CopyFrom(
            q.Stats(
                queue_wait_ms=max(0.0, (started - task.enqueued_at) * 1000) if task.enqueued_at else 0.0,
                parse_ms=s.parse_ms,
                resume_ms=s.resume_ms,
                quantum_ms=s.quantum_ms,
                suspend_ms=s.suspend_ms,
                overshoot_ms=s.overshoot_ms,
                plan_bytes=s.plan_bytes,
                worker=self.name,
                progress=s.progress,
            )
        )
        return reply, page

    def store(self, dataset: Dataset, graph: str) -> TripleStore:
        """The store of the task's graph: the default graph, or a named graph."""
        if not graph:
            return self.stores[dataset.name]
        store = self.graphs.get(dataset.name, {}).get(graph)
        if store is None:
            raise UnknownGraph(f"dataset {dataset.name} has no graph <{graph}>")
        return store

    def _saved(self, task: q.Task) -> bytes | None:
        """The saved plan the task resumes (None: it starts a query)."""
        kind = task.WhichOneof("input")
        if kind == "query":
            return None
        if kind == "plan":
            return task.plan
        if kind == "plan_ref":
            kept = plans.load(self.redis, task.plan_ref)
            if kept is None:
                raise PlanExpired("the saved plan has expired or was replaced by a replay of its page; start again")
            return kept
        raise InvalidPlan("task has neither a query nor a plan")

    def _execute(self, task: q.Task, dataset: Dataset, store: TripleStore, saved: bytes | None) -> QuantumPage:
        return execute(
            store,
            query=task.query if saved is None else None,
            saved=saved,
            quantum_seconds=None if dataset.quantum_ms == math.inf else dataset.quantum_ms / 1000,
            max_results=dataset.max_results,
            max_bytes=dataset.max_page_bytes,
            columns=task.columns,
            partial=task.partial,
            whole=task.whole,
            cpu_clock=True,  # a plan run whole: a quantum of work, however busy the machine (`execute`)
        )

    @staticmethod
    def _reply(task: q.Task, page: QuantumPage) -> q.Reply:
        """The page's rows in the form the task asks for (written from term ids natively when the
        store allows)."""
        reply = q.Reply(id=task.id)
        out = reply.page
        out.head.extend(page.head)
        out.ask = page.form == ASK
        out.results = page.count
        if out.ask:
            out.boolean = page.boolean
        elif task.rows == q.ROW_FORMAT_TERMS:
            terms, cells = term_rows.encode(page.rows)
            out.rows.terms.extend(terms)
            out.rows.cells.extend(cells)
        elif task.rows in TEXT_FORMATS:
            out.text = page.text(TEXT_FORMATS[task.rows])
        else:
            out.bindings_json = page.bindings_json()
        return reply


class WorkerStalled(BaseException):
    """Raised in the main thread when a task's engine work passes the stall limit. A BaseException,
    so that no `except Exception` on its way out of the engine takes it for a query's error."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the task ran past the stall limit of {seconds:g} s")
        self.seconds = seconds


@contextlib.contextmanager
def watchdog(seconds: float | None, task_id: str = "", recorder: StallRecorder | None = None) -> Iterator[None]:
    """Stop the block if it runs for `seconds` (None: no limit), with two hands, since no single
    one both always fires and is safe:

    - SIGALRM, whose handler runs as soon as the main thread runs Python again (an operator, an
      expression; `re` looks at signals too): it logs the task and the stack, and raises
      WorkerStalled out of the block (the worker answers the task, then exits: what the exception
      interrupted may have left the process's caches or pools half-updated).
    - the `recorder` (quanta.worker.stalls), a process of its own that needs nothing of this one,
      for a main thread stuck in C code that holds the GIL and never looks at signals (native
      code, some builtins), where neither that handler nor SIGTERM's nor another thread can run:
      STALL_GRACE_S / 2 after the limit it counts the stall against the task in Redis, and
      STALL_GRACE_S after it sends the worker a signal whose faulthandler handler (C, no GIL)
      prints every thread's stack on stderr, then ends the process. The task stays pending,
      another worker reclaims it, and the task's count of stalls sets aside a task that does it
      again. Without a recorder, only the first hand watches.

    Entering and leaving cost no thread and no system call but the timer's: the block is armed
    for the recorder by a few stores in memory it shares, which it looks at only when a block could
    have stalled. (Before, faulthandler's own watchdog was the second hand: CPython starts its
    thread anew at each arm and wakes and joins it at each cancel, about a quarter of a small
    query's worker time; with a pipe line to the recorder at each end, a third.)"""
    if seconds is None:
        yield
        return
    if not _watched.installed:
        signal.signal(signal.SIGALRM, _stalled)
        _watched.installed = True
    _watched.task, _watched.seconds, _watched.armed = task_id, seconds, True
    if recorder is not None:
        recorder.arm(task_id, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        _watched.armed = False  # first: a SIGALRM already on its way is ignored
        signal.setitimer(signal.ITIMER_REAL, 0)
        if recorder is not None:
            recorder.disarm()


class _Watched:
    """The watched block, for SIGALRM's handler."""

    task = ""
    seconds = 0.0
    armed = False
    installed = False  # SIGALRM's handler is _stalled (signal.getsignal is slow: it makes an enum)


_watched = _Watched()


def _stalled(signum: int, frame: FrameType | None) -> None:
    if not _watched.armed:
        return
    _watched.armed = False
    stack = "".join(traceback.format_stack(frame))
    log.error("task %s ran past the stall limit (%g s)", _watched.task, _watched.seconds, extra={"stack": stack})
    raise WorkerStalled(_watched.seconds)


def by_reference(mode: int, dataset: Dataset, size: int) -> bool:
    """The cost rule (seed 003): ship the state while it is small; keep it
    server-side when it is large."""
    if mode == q.PLAN_MODE_VALUE:
        return False
    if mode == q.PLAN_MODE_REFERENCE:
        return True
    if dataset.plan_mode != "auto":
        return dataset.plan_mode == "reference"
    return size > dataset.plan_threshold_bytes


def failure(task: q.Task, e: QuantaError) -> q.Reply:
    """The error reply for what the engine or the worker raised: its kind, and
    the members the client acts on (where a syntax error is, which operator)."""
    if isinstance(e, QuerySyntaxError):
        return error(task, e.kind, e.message, line=e.line, column=e.column)
    if isinstance(e, UnsupportedQuery):
        return error(task, e.kind, str(e), operator=e.operator)
    return error(task, e.kind, str(e))


def error(
    task: q.Task, kind: ErrorKind, message: str, *, line: int = 0, column: int = 0, operator: str = ""
) -> q.Reply:
    return q.Reply(
        id=task.id, error=q.Error(kind=kind.slug, message=message, line=line, column=column, operator=operator)
    )
