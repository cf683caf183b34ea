"""`LocalTransport`: the real engine in this process, over real HDT files (no service).

For tests, benchmarks of the client's decompositions, and embedding: each
request runs one quantum of `quanta.engine.execute` exactly as a worker
does, and `next` is the saved plan itself (`plan_token`: base64, unsigned,
as the gateway's own transport keeps a plan: the token never leaves the
process, so there is no untrusted party in between). Needs quanta-engine (not a dependency of the
client: imported at the first quantum).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from quanta.client.plan.parsing import query_error
from quanta.client.transport import QueryError, SubPage, SubRequest
from quanta.sparql.errors import ErrorKind, QuantaError

if TYPE_CHECKING:
    from quanta.engine.storage import TripleStore

ASK = 1  # quanta.engine.plan.ASK


class LocalTransport:
    """`stores[dataset][graph]`: graph None is the default graph, else a
    named graph's IRI. A quantum of `quantum_s` seconds (None: never
    suspend) and pages of at most `max_results` rows."""

    def __init__(
        self,
        stores: Mapping[str, Mapping[str | None, TripleStore]],
        *,
        quantum_s: float | None = 0.075,
        max_results: int | None = 100_000,
    ) -> None:
        self.stores = stores
        self.quantum_s = quantum_s
        self.max_results = max_results
        self.requests = 0

    def cardinalities(self, dataset: str, graph: str | None) -> TripleStore | None:
        return self.stores.get(dataset, {}).get(graph)

    async def named_graphs(self, dataset: str) -> list[str]:
        graphs = self.stores.get(dataset)
        if graphs is None:
            raise QueryError(ErrorKind.UNKNOWN_DATASET, f"no dataset named {dataset!r}")
        return [g for g in graphs if g is not None]

    async def run(self, request: SubRequest) -> SubPage:
        self.requests += 1
        page = self.run_sync(request)
        await asyncio.sleep(0)  # a quantum is a request: let others run in between
        return page

    def run_sync(self, request: SubRequest) -> SubPage:
        graphs = self.stores.get(request.dataset)
        if graphs is None:
            raise QueryError(ErrorKind.UNKNOWN_DATASET, f"no dataset named {request.dataset!r}")
        store = graphs.get(request.graph)
        if store is None:
            raise QueryError(ErrorKind.UNKNOWN_GRAPH, f"{request.dataset} has no graph <{request.graph}>")
        saved = None if request.query is not None else token_plan(request.next or "")
        page, plan = run_quantum(store, request, saved, quantum_s=self.quantum_s, max_results=self.max_results)
        return page if plan is None else replace(page, next=plan_token(plan))


def run_quantum(
    store: TripleStore, request: SubRequest, saved: bytes | None, *,
    quantum_s: float | None, max_results: int | None, max_bytes: int | None = None,
) -> tuple[SubPage, bytes | None]:  # fmt: skip
    """One quantum of `request` (resuming `saved` when it continues a query), as a worker runs
    it: the page without its `next` token, and the saved plan (None: the query is complete). The
    token is the caller's to make: this one's, or the gateway's for the quanta it runs itself."""
    from quanta.engine.execute import execute  # the engine: not a dependency of the client

    try:
        page = execute(
            store, query=request.query if saved is None else None, saved=saved, quantum_seconds=quantum_s,
            max_results=max_results, max_bytes=max_bytes, columns=request.columns, partial=request.partial,
            whole=request.whole,
        )  # fmt: skip
    except QuantaError as error:
        raise query_error(error) from error
    ask = page.form == ASK
    text = b"" if ask else page.text(request.render or "json")
    s = page.stats
    stats = {
        "parse_ms": s.parse_ms, "resume_ms": s.resume_ms, "quantum_ms": s.quantum_ms, "suspend_ms": s.suspend_ms,
        "overshoot_ms": s.overshoot_ms, "plan_bytes": s.plan_bytes, "results": page.count, "progress": s.progress,
    }  # fmt: skip
    sub = SubPage(
        variables=[] if ask else list(page.head),
        rows=[] if ask or request.render else page.rows,
        next=None,
        boolean=page.boolean if ask and page.next is None else None,
        stats=stats,
        bytes=len(page.next or b"") + (16 if ask else len(text)),
        text=text if request.render else b"",
    )
    return sub, page.next


def plan_token(plan: bytes) -> str:
    """The `next` token of a plan kept in this process (read back by `token_plan`)."""
    return base64.urlsafe_b64encode(plan).decode()


def token_plan(token: str) -> bytes:
    """The saved plan of a `plan_token`."""
    try:
        return base64.urlsafe_b64decode(token.encode())
    except (binascii.Error, ValueError) as error:
        raise QueryError(ErrorKind.INVALID_TOKEN, "not a token of this transport") from error
