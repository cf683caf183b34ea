"""The smart client: any SPARQL 1.1 query over the preemptive protocol.

    client = SmartClient(HttpTransport("http://127.0.0.1:8000"))
    execution = await client.prepare("SELECT ... ORDER BY ?x", DatasetSpec("watdiv-100k"))
    async for row in execution.solutions():   # rows as soon as they are known
        ...
    await execution.aclose()                  # no request is sent after this returns

`prepare` parses and plans: whatever can be known before running (a syntax
error with its line and column, a SERVICE not on the allowlist, a graph the
dataset lacks) is raised there, before any result. The plan sends the
server the largest pieces it evaluates (`quanta.sparql.fragment`) and runs
the rest here (docs/client.md says what runs where, and what it costs in
requests).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType

from quanta.client.budgets import DEFAULT_BUDGETS, Budgets
from quanta.client.plan.context import QueryContext
from quanta.client.plan.parsing import query_error
from quanta.client.plan.query import QueryPlan, plan_query
from quanta.client.plan.whole import WholeTries
from quanta.client.requester import DEFAULT_RETRY, Cancelled, OnRequest, Requester, RequestEvent, Retry
from quanta.client.services import ServiceEndpoint
from quanta.client.transport import QueryError, SubRequest, Transport
from quanta.sparql.errors import ErrorKind, QuantaError
from quanta.sparql.term_rows import Row

Triple = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """The dataset a query runs on: a dataset of the service, and the SPARQL
    Protocol's `default-graph-uri` / `named-graph-uri` (None when not given;
    then the query's FROM / FROM NAMED apply, else the dataset's own graphs)."""

    name: str
    default_graph_uri: tuple[str, ...] | None = None
    named_graph_uri: tuple[str, ...] | None = None


class SmartClient:
    """Plans and runs queries over `transport`. One client serves any number
    of concurrent queries (each has its own Execution)."""

    def __init__(
        self,
        transport: Transport,
        *,
        budgets: Budgets = DEFAULT_BUDGETS,
        services: Mapping[str, ServiceEndpoint] | None = None,
        on_request: OnRequest | None = None,
        retry: Retry = DEFAULT_RETRY,
        optional: str = "server",
        ship: bool = True,
        whole: bool = True,
    ) -> None:
        """`optional`: how OPTIONAL runs when the server evaluates both sides: "server"
        (in the server's piece), or in the client, "auto" (OptJoin: one query) or "bind"
        (BindLeftJoin: one per block).
        `ship`: GROUP BY and DISTINCT over a server piece run on the server in
        partial answers (function shipping); False: here, over every row (data shipping).
        `whole`: a query outside the fragment that a worker can run whole (`fragment.whole_refusals`)
        is sent whole first (`ops.remote.Whole`), in pieces when the worker cannot run it whole
        (`plan.whole` says when it is tried); False: in pieces at once (with `ship` False too)."""
        self.transport = transport
        self.optional = optional
        self.ship = ship
        self.whole = WholeTries() if whole and ship else None
        self.budgets = budgets
        self.services = dict(services or {})
        self.on_request = on_request
        self.retry = retry

    async def prepare(
        self,
        query: str,
        dataset: DatasetSpec | str,
        *,
        name: str | None = None,
        on_request: OnRequest | None = None,
        base: str | None = None,
    ) -> Execution:
        """Parse and plan `query`; raise QueryError for anything known before running it.
        `on_request`: this query's own hook (a progress display, say), called after the client's;
        `base`: what relative IRIs resolve against when the query has no BASE."""
        spec = DatasetSpec(dataset) if isinstance(dataset, str) else dataset
        hook = _both(self.on_request, on_request)
        requester = Requester(self.transport, name=name or "query", on_request=hook, retry=self.retry)
        context = QueryContext(requester, spec.name, self.budgets, self.services)
        try:
            plan = await plan_query(
                query, spec, context, self.transport, strategy=self.optional, base=base, ship=self.ship,
                whole=self.whole,
            )  # fmt: skip
        except QuantaError as error:  # a constant expression past a limit, evaluated while planning
            context.close()
            raise query_error(error) from error
        except BaseException:
            context.close()
            raise
        return Execution(plan, context)


def _both(first: OnRequest | None, second: OnRequest | None) -> OnRequest | None:
    if first is None or second is None:
        return first or second

    def both(event: RequestEvent) -> None:
        first(event)
        second(event)

    return both


class Execution:
    """One running query. Iterate `solutions()` (SELECT), `await boolean()`
    (ASK) or `triples()` (CONSTRUCT, DESCRIBE) once; `aclose()` stops it."""

    def __init__(self, plan: QueryPlan, context: QueryContext) -> None:
        self.plan = plan
        self.context = context
        self.form: str = plan.form
        self.variables: list[str] = list(plan.variables)
        self._started = False

    @property
    def requests(self) -> int:
        """Requests sent to the server so far (retries included)."""
        return self.context.requester.requests

    @property
    def bytes(self) -> int:
        """Bytes of the server's pages so far."""
        return self.context.requester.bytes

    def solutions(self) -> AsyncIterator[Row]:
        """SELECT: each solution, one term per variable (None: unbound), as soon as it is known."""
        self._expect("select")
        return self._rows()

    def batches(self) -> AsyncIterator[list[Row]]:
        """SELECT's solutions, or CONSTRUCT's and DESCRIBE's triples, in batches as
        they come (a page, or an operator's output): no Python step per row."""
        if self.form == "ask":
            raise QueryError(ErrorKind.INVALID_REQUEST, "an ASK query has a boolean, not rows")
        self._expect(self.form)
        return self._batches()

    def rendered(self, fmt: str) -> AsyncIterator[builtins.bytes] | None:
        """SELECT whose answer is one server query (no client-side operator, `QueryPlan.direct`):
        each page's rows as the server writes them in results format `fmt` (`SubPage.text`),
        for the transport of the gateway, which splices them into its response. None otherwise."""
        remote = self.plan.direct
        if remote is None:
            return None
        self._expect("select")
        source = remote.piece.source
        request = SubRequest(self.context.dataset, source.graph, remote.text, render=fmt, columns=tuple(self.variables))
        return self._texts(request)

    async def boolean(self) -> bool:
        """ASK: whether the pattern has a solution (stops at the first)."""
        self._expect("ask")
        try:
            async for _ in self._rows():
                return True
            return False
        finally:
            await self.aclose()

    def triples(self) -> AsyncIterator[Triple]:
        """CONSTRUCT and DESCRIBE: the graph's triples (dictionary syntax), each once."""
        if self.form not in ("construct", "describe"):
            raise QueryError(ErrorKind.INVALID_REQUEST, f"a {self.form.upper()} query has no triples")
        self._expect(self.form)
        return self._triples()

    async def aclose(self) -> None:
        """Stop: no request is sent once this returns; temporary files are removed."""
        self.context.close()

    async def __aenter__(self) -> Execution:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    def _expect(self, form: str) -> None:
        if self.form != form:
            raise QueryError(ErrorKind.INVALID_REQUEST, f"this is a {self.form.upper()} query, not {form.upper()}")
        if self._started:
            raise QueryError(ErrorKind.INVALID_REQUEST, "the results of an execution are read once")
        self._started = True

    async def _rows(self) -> AsyncIterator[Row]:
        async for batch in self._batches():
            for row in batch:
                if self.context.closed:
                    return  # closed (aclose) while reading: nothing more
                yield row

    async def _batches(self) -> AsyncIterator[list[Row]]:
        try:
            async for batch in self.plan.run(self.context):
                if self.context.closed:
                    return  # closed (aclose) while reading: nothing more
                yield batch
        except Cancelled:
            return
        except QuantaError as error:  # the client's own operators past a limit (an expression's, say)
            raise query_error(error) from error
        finally:
            self.context.close()

    async def _texts(self, request: SubRequest) -> AsyncIterator[builtins.bytes]:
        try:
            async for page in self.context.requester.pages(request):
                if self.context.closed:
                    return
                yield page.text
        except Cancelled:
            return
        finally:
            self.context.close()

    async def _triples(self) -> AsyncIterator[Triple]:
        async for row in self._rows():
            s, p, o = row
            assert s is not None and p is not None and o is not None
            yield s, p, o
