"""The first quantum of a /sparql piece, run in the gateway itself (QUANTA_LOCAL_QUANTUM_MS).

Through the queue, a query with a handful of results costs two Python processes and a Redis
round trip (admission, a worker's wake-up, its reply, the gateway's), a few milliseconds against
the fraction of one its plan takes. When the gateway can read a dataset's HDT file (memory-mapped,
read-only, as the workers do; only once its side index exists, which workers build), it runs a
piece's first quantum here, briefly: a query done within it is answered without a hop; one that
is not is suspended and its saved plan goes to the workers like any other, so every later quantum
is theirs and the answer is the same (Resume(Suspend(P)) = P). This is "To Ship or Not to
(Function) Ship"'s choice made per query: short work runs where the query arrives.

The quantum runs on the event loop (the native core holds the GIL: a thread would not let the
loop run meanwhile), so it is kept short and rationed: a token bucket lets local quanta take at
most `share` of the process's time (bursts up to `BURST_QUANTA` quanta); past it, pieces go to the
queue as they did before, where the workers scale out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from quanta.client.in_process import run_quantum
from quanta.client.transport import QueryError, SubPage, SubRequest
from quanta.common.catalog import Dataset
from quanta.gateway import metrics
from quanta.sparql.errors import ErrorKind

if TYPE_CHECKING:
    from quanta.engine.storage import TripleStore

log = logging.getLogger("quanta.gateway")
BURST_QUANTA = 10  # the bucket holds this many full local quanta


class FirstQuantum:
    """Runs first quanta here for the datasets whose files this process can open."""

    def __init__(self, catalog: Mapping[str, Dataset], quantum_ms: float, share: float, worker: str) -> None:
        self.catalog = catalog
        self.quantum_s = quantum_ms / 1000
        self.share = share
        self.worker = worker  # what a page's stats name as the worker that ran it
        self.stores: dict[tuple[str, str | None], TripleStore] = {}
        self.unreadable: set[tuple[str, str | None]] = set()
        self.waiting: set[tuple[str, str | None]] = set()  # for a side index (logged once)
        self.capacity = BURST_QUANTA * self.quantum_s
        self.tokens = self.capacity
        self.refilled = time.perf_counter()

    def open(self) -> bool:
        """Open every dataset's graphs whose side index a worker has built (blocking: run it in a
        thread); whether none is left to open but those this process cannot read (those stay with
        the workers). A file not yet indexed is tried again at the next call."""
        from quanta.engine.execute import warm_up
        from quanta.engine.storage import open_store, side_index_path

        done = True
        for dataset in self.catalog.values():
            files: list[tuple[str | None, Path]] = [(None, dataset.path), *dataset.graphs]
            for graph, path in files:
                if (dataset.name, graph) in self.stores or (dataset.name, graph) in self.unreadable:
                    continue
                if not Path(side_index_path(str(path))).exists():
                    if (dataset.name, graph) not in self.waiting:
                        log.info("first quanta of %s go to the workers until %s is indexed", dataset.name, path)
                        self.waiting.add((dataset.name, graph))
                    done = False
                    continue
                try:
                    store = open_store(str(path), name=dataset.store_name(graph), backend=dataset.backend or None)
                except (OSError, ValueError, RuntimeError) as error:
                    log.warning("first quanta of %s go to the workers: %s", dataset.name, error)
                    self.unreadable.add((dataset.name, graph))
                    continue
                if not self.stores:
                    warm_up(store)  # the engine's imports, here rather than in a first query's time
                self.stores[(dataset.name, graph)] = store
        return done

    def run(self, request: SubRequest) -> tuple[SubPage, bytes | None] | None:
        """`request`'s first quantum run here: the page (its `next` token is the transport's to
        make) and the saved plan (None: the query is complete); None when it is the workers' to
        run (no store here, or no time left in the share). Raises QueryError for a query the
        engine refuses, as a worker's reply would."""
        store = self.stores.get((request.dataset, request.graph))
        if store is None or request.query is None:
            return None
        dataset = self.catalog[request.dataset]
        now = time.perf_counter()
        self.tokens = min(self.capacity, self.tokens + (now - self.refilled) * self.share)
        self.refilled = now
        if self.tokens < self.quantum_s:
            metrics.LOCAL_QUANTA.labels("queued").inc()
            return None
        try:
            page, plan = run_quantum(
                store, request, None, quantum_s=self.quantum_s,
                max_results=dataset.max_results, max_bytes=dataset.max_page_bytes,
            )  # fmt: skip
        except QueryError as error:
            # a query sent whole that cannot run whole here cannot on a worker either: the pieces follow
            unfinished = request.whole and error.kind is ErrorKind.UNFINISHED
            metrics.LOCAL_QUANTA.labels("unfinished" if unfinished else "failed").inc()
            raise
        finally:
            elapsed = time.perf_counter() - now
            self.tokens -= elapsed
        metrics.LOCAL_QUANTA.labels("complete" if plan is None else "suspended").inc()
        stats = {**page.stats, "queue_wait_ms": 0.0, "worker": self.worker, "plan": None if plan is None else "value"}
        stats["round_trip_ms"] = round(elapsed * 1000, 3)
        return replace(page, stats=stats), plan
