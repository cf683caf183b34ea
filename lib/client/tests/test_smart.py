"""The smart client's behaviour over the real engine (LocalTransport on the
WatDiv sample): budgets (spilling to disk gives the same answers, in order;
a query over its budget fails, never in part), early termination, what
prepare refuses before running, closing, streaming, and the event loop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyoxigraph as ox
import pytest

from quanta.client import Budgets, DatasetSpec, QueryError, RequestEvent, SmartClient, SyncClient
from quanta.client.in_process import LocalTransport
from quanta.client.ops.order import term_key
from quanta.engine.storage import open_store
from quanta.sparql.errors import ErrorKind
from quanta.testkit.data import shared_dir
from quanta.testkit.oracle import as_multiset, oxigraph_rows, oxigraph_store

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"
FRIENDS = f"?s <{WSDBM}friendOf> ?o"  # 40,729 triples


@pytest.fixture(scope="module")
def transport() -> LocalTransport:
    return LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=0.01, max_results=2000)


@pytest.fixture(scope="module")
def reference() -> ox.Store:
    store = oxigraph_store(shared_dir() / "datasets" / "watdiv" / "watdiv-100k.nt.gz")
    return store


class Counted:
    """The on_request hook: every request the client sent."""

    def __init__(self) -> None:
        self.events: list[RequestEvent] = []

    def __call__(self, event: RequestEvent) -> None:
        self.events.append(event)


async def solutions(client: SmartClient, query: str) -> tuple[list[str], list[tuple[str | None, ...]], int, bool]:
    """Variables, rows, bytes spilled, and whether the temporary files are gone at the end."""
    execution = await client.prepare(query, "watdiv")
    rows = [row async for row in execution.solutions()]
    return execution.variables, rows, execution.context.disk_bytes, execution.context._temp is None


def test_order_by_over_its_budget_spills_and_keeps_the_order(transport, reference) -> None:
    query = f"SELECT ?s ?o WHERE {{ {FRIENDS} }} ORDER BY DESC(?o) ?s"
    head, rows, spilled, removed = asyncio.run(
        solutions(SmartClient(transport, budgets=Budgets(memory_rows=3000), whole=False), query)
    )  # the client's sort (a worker sorts it whole otherwise)
    assert spilled > 0 and removed, "sorted runs went to disk, and were removed"
    assert as_multiset(head, rows) == oxigraph_rows(reference, query)
    keys = [(term_key(o), term_key(s)) for s, o in rows]
    expected = [(term_key(str(r["o"].value)), term_key(str(r["s"].value))) for r in reference.query(query)]
    assert keys == expected


def test_order_by_with_limit_keeps_only_k_rows(transport, reference) -> None:
    query = f"SELECT ?s ?o WHERE {{ {FRIENDS} }} ORDER BY ?o ?s LIMIT 10 OFFSET 5"
    _, rows, spilled, _ = asyncio.run(solutions(SmartClient(transport, budgets=Budgets(memory_rows=100)), query))
    assert spilled == 0, "top-k: 2k rows in memory, nothing on disk"
    expected = [(str(r["s"].value), str(r["o"].value)) for r in reference.query(query)]
    assert rows == expected


@pytest.mark.parametrize(
    "query",
    [
        f"SELECT DISTINCT ?o WHERE {{ {FRIENDS} }}",
        f"SELECT ?s (COUNT(*) AS ?n) (COUNT(DISTINCT ?o) AS ?d) WHERE {{ {FRIENDS} }} GROUP BY ?s",
        f"SELECT ?s ?o ?z WHERE {{ ?s <{WSDBM}likes> ?o OPTIONAL {{ ?s <{WSDBM}follows> ?z }} }}",
    ],
    ids=["distinct", "group-by", "optjoin"],
)
def test_distinct_group_by_and_optjoin_over_their_budget_spill(transport, reference, query: str) -> None:
    optional = "auto" if "OPTIONAL" in query else "server"  # the client's OptJoin, not the workers'
    head, rows, spilled, removed = asyncio.run(
        solutions(SmartClient(transport, budgets=Budgets(memory_rows=200), optional=optional, whole=False), query)
    )
    assert spilled > 0 and removed
    assert as_multiset(head, rows) == oxigraph_rows(reference, query)


def test_a_query_over_its_disk_budget_fails_and_says_so(transport) -> None:
    client = SmartClient(transport, budgets=Budgets(memory_rows=100, disk_bytes=10_000), whole=False)
    with pytest.raises(QueryError) as raised:
        asyncio.run(solutions(client, f"SELECT ?s ?o WHERE {{ {FRIENDS} }} ORDER BY ?o"))
    assert raised.value.kind is ErrorKind.BUDGET_EXCEEDED


def test_a_path_over_its_budget_fails_and_says_so(transport) -> None:
    client = SmartClient(transport, budgets=Budgets(path_nodes=50))
    with pytest.raises(QueryError) as raised:
        # a closure the client expands (its start bound by VALUES, not by a pattern the server anchors it to)
        query = f"SELECT ?y WHERE {{ VALUES ?x {{ <{WSDBM}User1> }} ?x <{WSDBM}follows>+ ?y }}"
        asyncio.run(solutions(client, query))
    assert raised.value.kind is ErrorKind.BUDGET_EXCEEDED


def test_limit_stops_sending_requests(transport) -> None:
    """A client-side plan (OPTIONAL: a bind left join here) stops following
    `next` once the LIMIT has its rows."""
    query = f"SELECT * WHERE {{ {FRIENDS} OPTIONAL {{ ?o <{WSDBM}likes> ?l }} }}"
    small = LocalTransport(transport.stores, quantum_s=None, max_results=100)
    counts = []
    for text in (query, query + " LIMIT 5"):
        counted = Counted()
        client = SmartClient(small, on_request=counted, optional="bind")
        rows = asyncio.run(solutions(client, text))[1]
        counts.append((len(rows), len(counted.events)))
    (all_rows, all_requests), (limited_rows, limited_requests) = counts
    assert limited_rows == 5 and all_rows > 40_000
    assert limited_requests <= 3 and all_requests > 100


def test_what_prepare_refuses_is_refused_before_any_request(transport) -> None:
    counted = Counted()
    client = SmartClient(transport, on_request=counted)
    cases = [
        ("SELECT * WHERE {\n  ?s ?p ?o .\n  FILTER( }", ErrorKind.SYNTAX_ERROR),
        ("SELECT * WHERE { SERVICE <http://elsewhere.example/sparql> { ?s ?p ?o } }", ErrorKind.SERVICE_NOT_ALLOWED),
        ("SELECT * FROM <http://example.org/none> WHERE { ?s ?p ?o }", ErrorKind.UNKNOWN_GRAPH),
    ]
    for query, kind in cases:
        with pytest.raises(QueryError) as raised:
            asyncio.run(client.prepare(query, "watdiv"))
        assert raised.value.kind is kind, query
    with pytest.raises(QueryError) as syntax:
        asyncio.run(client.prepare(cases[0][0], "watdiv"))
    assert syntax.value.line == 3 and syntax.value.column
    with pytest.raises(QueryError) as unknown:
        asyncio.run(client.prepare("SELECT * WHERE { ?s ?p ?o }", DatasetSpec("watdiv", ("http://example.org/g",))))
    assert unknown.value.kind is ErrorKind.UNKNOWN_GRAPH
    assert counted.events == []


def test_graph_on_a_dataset_without_named_graphs_is_empty(transport) -> None:
    """SPARQL: GRAPH over a graph the dataset lacks matches nothing."""
    client = SmartClient(transport)
    for query in ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", "SELECT * WHERE { GRAPH <http://x/g> { ?s ?p ?o } }"):
        assert asyncio.run(solutions(client, query))[1] == []


def test_closing_stops_the_requests_and_removes_the_files(transport) -> None:
    async def scenario() -> tuple[int, int, bool]:
        counted = Counted()
        small = LocalTransport(transport.stores, quantum_s=None, max_results=50)
        client = SmartClient(small, on_request=counted, budgets=Budgets(memory_rows=100), optional="bind")
        execution = await client.prepare(
            f"SELECT * WHERE {{ {FRIENDS} OPTIONAL {{ ?o <{WSDBM}likes> ?l }} }}", "watdiv"
        )
        rows = execution.solutions()
        for _ in range(120):
            await anext(rows)
        await execution.aclose()
        sent = len(counted.events)
        leftover = [row async for row in rows]  # nothing more comes, nothing more is asked
        return sent, len(counted.events) - sent, execution.context._temp is None and not leftover

    sent, after, clean = asyncio.run(scenario())
    assert sent > 0 and after == 0 and clean


def test_rows_stream_before_the_query_ends(transport) -> None:
    async def scenario() -> tuple[int, int]:
        counted = Counted()
        small = LocalTransport(transport.stores, quantum_s=None, max_results=100)
        client = SmartClient(small, on_request=counted)
        execution = await client.prepare(
            f"SELECT * WHERE {{ ?s <{WSDBM}follows> ?o OPTIONAL {{ ?o <{WSDBM}likes> ?l }} }}", "watdiv"
        )
        rows = execution.solutions()
        await anext(rows)
        first = len(counted.events)
        async for _ in rows:
            pass
        return first, len(counted.events)

    first, total = asyncio.run(scenario())
    assert first <= 2 < total


def test_client_side_work_leaves_the_event_loop_to_others(transport) -> None:
    """Sorting 40,000 rows on the client while another task needs the loop:
    the loop is never held long (the gateway runs many queries in one loop)."""

    async def scenario() -> float:
        whole = LocalTransport(transport.stores, quantum_s=None, max_results=None)
        client = SmartClient(whole, budgets=Budgets(memory_rows=100_000))
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        task = asyncio.create_task(ticker())
        await solutions(client, f"SELECT ?s ?o WHERE {{ {FRIENDS} }} ORDER BY ?o ?s")
        done.set()
        await task
        return max(gaps)

    assert asyncio.run(scenario()) < 0.5  # one page of 40,729 rows is read at once; sorting yields


def test_the_sync_client_runs_any_query(transport, reference) -> None:
    query = f"SELECT ?o (COUNT(*) AS ?n) WHERE {{ {FRIENDS} }} GROUP BY ?o ORDER BY DESC(?n) ?o LIMIT 3"
    with SyncClient(transport) as client:
        execution = client.query(query, "watdiv")
        rows = list(execution.solutions())
        assert client.query(f"ASK {{ <{WSDBM}User1> <{WSDBM}follows>+ ?y }}", "watdiv").boolean()
        triples = list(client.query(f"CONSTRUCT {{ ?s <urn:p> ?o }} WHERE {{ {FRIENDS} }} LIMIT 4", "watdiv").triples())
    assert rows == [(str(r["o"].value), f'"{r["n"].value}"^^<{r["n"].datatype.value}>') for r in reference.query(query)]
    assert len(triples) == 4 and all(p == "urn:p" for _, p, _ in triples)


def test_the_sync_client_takes_the_smart_clients_options(transport, reference) -> None:
    """`optional`: an OPTIONAL over two server pieces as one query (auto) or by blocks (bind)."""
    query = f"SELECT * WHERE {{ {FRIENDS} OPTIONAL {{ ?o <{WSDBM}likes> ?l }} }} ORDER BY ?s ?o ?l LIMIT 50"
    requests, answers = [], []
    for optional in ("auto", "bind"):
        counted = Counted()
        with SyncClient(transport, on_request=counted, optional=optional) as client:
            answers.append(list(client.query(query, "watdiv").solutions()))
        requests.append(len(counted.events))
    assert answers[0] == answers[1] and len(answers[0]) == 50
    assert requests[1] > requests[0]


def test_a_bind_join_block_holds_at_most_the_memory_budget_of_rows(transport, reference) -> None:
    """Blocks end at `block_size` keys or at `memory_rows` rows: few keys with
    many rows each are shipped again rather than held all at once."""
    query = f"SELECT * WHERE {{ {FRIENDS} OPTIONAL {{ ?s <{WSDBM}userId> ?id }} }}"
    counted = Counted()
    client = SmartClient(transport, budgets=Budgets(block_size=100_000, memory_rows=1000), optional="bind")
    client.on_request = counted
    head, rows, _, _ = asyncio.run(solutions(client, query))
    assert as_multiset(head, rows) == oxigraph_rows(reference, query)
    assert len(counted.events) > 40  # 40,729 left rows, 1,000 a block


@pytest.mark.parametrize(
    ("query", "direct"),
    [
        (f"SELECT * WHERE {{ {FRIENDS} }}", True),
        (f"SELECT ?o ?s WHERE {{ {FRIENDS} FILTER(?s != ?o) }} LIMIT 70 OFFSET 3", True),
        (f"SELECT ?o WHERE {{ {FRIENDS} . ?o <{WSDBM}likes> ?l }}", True),
        (f"SELECT DISTINCT ?o WHERE {{ {FRIENDS} }}", False),
        (f"SELECT * WHERE {{ {FRIENDS} OPTIONAL {{ ?o <{WSDBM}likes> ?l }} }}", True),
        (f"SELECT (?s AS ?t) WHERE {{ {FRIENDS} }}", True),
        (f"SELECT ?s WHERE {{ {FRIENDS} }} ORDER BY ?s LIMIT 5", False),
    ],
)
def test_a_query_that_is_one_server_piece_is_rendered_by_the_server(transport, query: str, direct: bool) -> None:
    """`Execution.rendered`: the pages of the one server query, written by the
    server in the answer's format and column order, are the document the
    endpoint's writers make of the rows; any other query has rows only."""
    from quanta.sparql.results import FORMATS, writer

    async def both(fmt: str) -> tuple[str, str | None]:
        client = SmartClient(transport)
        execution = await client.prepare(query, "watdiv")
        out = writer(fmt)
        rows = out.head(execution.variables) + out.rows([row async for row in execution.solutions()]) + out.end()
        execution = await client.prepare(query, "watdiv")
        pages = execution.rendered(fmt)
        if pages is None:
            return rows, None
        texts = [text async for text in pages]
        if fmt == "json":  # arrays, joined as the endpoint joins them
            body = ",".join(t.decode()[1:-1] for t in texts if t != b"[]")
            return rows, writer(fmt).head(execution.variables) + body + out.end()
        return rows, writer(fmt).head(execution.variables) + b"".join(texts).decode() + out.end()

    for fmt in FORMATS:
        rows, rendered = asyncio.run(both(fmt))
        assert (rendered is not None) == direct
        if rendered is not None:
            assert rendered == rows, fmt


@pytest.mark.parametrize(
    ("query", "as_written"),
    [
        (f"SELECT ?o ?s WHERE {{ {FRIENDS} FILTER(?s != ?o) }} LIMIT 70 OFFSET 3", True),
        (f"PREFIX w: <{WSDBM}>\nSELECT ?o WHERE {{ {FRIENDS} . ?o w:likes ?l }}", True),
        (f"SELECT * WHERE {{ {FRIENDS} }}", False),  # the planner names SELECT *'s columns
        (f"SELECT DISTINCT ?o WHERE {{ {FRIENDS} }}", False),
        (f"SELECT ?s FROM <{WSDBM}g> WHERE {{ {FRIENDS} }}", False),
    ],
)
def test_a_select_the_server_evaluates_whole_is_sent_as_written(transport, query: str, as_written: bool) -> None:
    """No planning for a SELECT of named variables the server evaluates whole: the worker
    gets the text itself (after the endpoint's BASE), and the answer is the planner's."""

    async def sent() -> tuple[str | None, list[str]]:
        client = SmartClient(transport)
        try:
            execution = await client.prepare(query, "watdiv", base="http://example.org/sparql")
        except QueryError:
            return None, []
        direct = execution.plan.direct
        await execution.aclose()
        return (direct.text if direct is not None else None), execution.variables

    text, variables = asyncio.run(sent())
    assert (text == f"BASE <http://example.org/sparql>\n{query}") == as_written, text
    if as_written:
        assert variables == [v.strip("?") for v in query.split("SELECT ")[1].split(" WHERE")[0].split()]
