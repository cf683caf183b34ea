"""Run one task: one quantum of the engine, turned into a Reply."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping

import redis

from quanta.common import keys
from quanta.common.catalog import Dataset
from quanta.engine.execute import Page, execute
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
    ):
        self.datasets = datasets
        self.stores = stores  # each dataset's default graph
        self.graphs = graphs or {}  # each dataset's named graphs, by IRI
        self.redis = client
        self.name = name

    def run(self, task: q.Task) -> tuple[q.Reply, Page | None]:
        started = time.time()
        try:
            dataset = self.datasets.get(task.dataset)
            if dataset is None:
                raise UnknownDataset(f"no dataset named {task.dataset!r}")
            page = self._execute(task, dataset)
        except QuantaError as e:
            return failure(task, e), None
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
            out.text = page.text(TEXT_FORMATS[task.rows])  # from term ids, natively when the store allows
        else:
            out.bindings_json = page.bindings_json()
        if page.next is not None:
            if by_reference(task.plan_mode, dataset, len(page.next)):
                out.plan_ref = self._keep(page.next)
            else:
                out.plan = page.next
        s = page.stats
        out.stats.CopyFrom(
            q.Stats(
                queue_wait_ms=max(0.0, (started - task.enqueued_at) * 1000) if task.enqueued_at else 0.0,
                parse_ms=s.parse_ms,
                resume_ms=s.resume_ms,
                quantum_ms=s.quantum_ms,
                suspend_ms=s.suspend_ms,
                overshoot_ms=s.overshoot_ms,
                plan_bytes=s.plan_bytes,
                worker=self.name,
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

    def _execute(self, task: q.Task, dataset: Dataset) -> Page:
        store = self.store(dataset, task.graph)
        seconds = None if dataset.quantum_ms == float("inf") else dataset.quantum_ms / 1000
        kind = task.WhichOneof("input")
        if kind == "query":
            return execute(
                store,
                query=task.query,
                quantum_seconds=seconds,
                max_results=dataset.max_results,
                max_bytes=dataset.max_page_bytes,
                columns=task.columns,
            )
        if kind == "plan":
            saved = task.plan
        elif kind == "plan_ref":
            kept = self.redis.get(keys.plan(task.plan_ref))
            if not isinstance(kept, bytes):
                raise PlanExpired("the saved plan has expired; start the query again")
            saved = kept
        else:
            raise InvalidPlan("task has neither a query nor a plan")
        return execute(
            store,
            saved=saved,
            quantum_seconds=seconds,
            max_results=dataset.max_results,
            max_bytes=dataset.max_page_bytes,
            columns=task.columns,
        )

    def _keep(self, plan: bytes) -> str:
        ref = secrets.token_urlsafe(16)
        self.redis.set(keys.plan(ref), plan, ex=keys.PLAN_TTL_S)
        return ref


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
