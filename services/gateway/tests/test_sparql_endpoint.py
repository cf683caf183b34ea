"""The SPARQL endpoint (/sparql) over real HTTP, a real redis-server and one
`quanta worker` process over the WatDiv sample at a tiny quantum (so queries
span many quanta); each test gets a gateway with the settings it needs.
pyoxigraph over the same triples is the oracle."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph as ox
import pytest
import redis

from quanta.client.transport import QueryError, SubRequest
from quanta.common import keys
from quanta.common.catalog import load_catalog
from quanta.common.redis_server import RedisServer, redis_server
from quanta.engine.storage import open_store
from quanta.gateway.config import Settings
from quanta.gateway.metrics import REGISTRY
from quanta.gateway.sparql_endpoint.first_quantum import FirstQuantum
from quanta.sparql.errors import ErrorKind
from quanta.testkit.data import shared_dir
from quanta.testkit.gateway import Served, problem
from quanta.testkit.oracle import Solution, oxigraph_answer, oxigraph_rows, oxigraph_solutions, oxigraph_store

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
NTRIPLES = shared_dir() / "datasets" / "watdiv" / "watdiv-100k.nt.gz"
SECRET = "sparql:0123456789abcdef01234567"
WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"
# 40 rows a page, 2 ms quanta: "likes" (about 1,100 triples) takes dozens of quanta.
LIKES = f"SELECT ?s ?o WHERE {{ ?s <{WSDBM}likes> ?o }}"
EVERYTHING = "SELECT * WHERE { ?s ?p ?o }"  # thousands of quanta
JSON = "application/sparql-results+json"


@dataclass
class SparqlService:
    redis_url: str
    catalog: Path
    redis: redis.Redis
    worker: subprocess.Popen[bytes]
    gateways: list[Served] = field(default_factory=list)

    def gateway(self, api_key: str | None = None, **settings: Any) -> httpx.Client:
        """A gateway of its own (stopped with the service) with these settings; `api_key`, an
        authenticated key, names the client's fair-use buckets (else they are its address's, shared by tests).
        No limit on new queries per second unless a test sets one: every test of the module starts its
        queries from one address, sharing one bucket in Redis (5/s drained it in a CI run)."""
        values: dict[str, Any] = {
            "catalog": self.catalog,
            "redis": {"url": self.redis_url},
            "secret_keys": SECRET,
            "sparql_query_rate": 0,
        }
        if api_key:
            values["api_key_hashes"] = hashlib.sha256(api_key.encode()).hexdigest()
        self.gateways.append(Served(Settings.from_env(**(values | settings))))
        client = self.gateways[-1].client
        if api_key:
            client.headers["x-api-key"] = api_key
        return client

    def quiet(self) -> int:
        """The count of tasks queued once it stays the same for half a second."""
        count, deadline = self.tasks_queued(), time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if (now := self.tasks_queued()) == count:
                return count
            count = now
        raise AssertionError("tasks are still being queued")

    def tasks_queued(self) -> int:
        """Every task ever added to the stream (Redis counts them: XINFO STREAM entries-added)."""
        info: dict[str, Any] = self.redis.xinfo_stream(keys.TASKS)
        return int(info["entries-added"])


def start(folder: Path, quantum_ms: float = 2, max_results: int = 40) -> Iterator[SparqlService]:
    shutil.copy(SAMPLE, folder / "watdiv-100k.hdt")
    catalog = folder / "catalog.toml"
    catalog.write_text(
        f'[datasets.watdiv]\npath = "watdiv-100k.hdt"\nquantum_ms = {quantum_ms}\nmax_results = {max_results}\n'
        '[datasets.other]\npath = "watdiv-100k.hdt"\ndefault = true\n'
    )
    with redis_server() as server:
        worker = _worker(server, catalog)
        service = SparqlService(server.url, catalog, redis.Redis.from_url(server.url), worker)
        try:
            yield service
        finally:
            for gateway in service.gateways:
                gateway.stop()
            worker.terminate()
            worker.wait(timeout=20)


def _worker(server: RedisServer, catalog: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "QUANTA_REDIS_URL": server.url}
    command = [sys.executable, "-m", "quanta.cli.main", "worker", "--catalog", str(catalog)]
    worker = subprocess.Popen([*command, "--reclaim-idle-ms", "5000"], env=env, stderr=subprocess.DEVNULL)
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + 120  # the first start builds the side index
    while client.zcard(keys.WORKERS) == 0:
        assert worker.poll() is None, "worker exited"
        assert time.monotonic() < deadline, "worker did not start"
        time.sleep(0.05)
    return worker


def solutions(body: bytes, media_type: str) -> Counter[Solution] | bool:
    """A results document, read by pyoxigraph, as oxigraph_rows gives the oracle's answer."""
    return oxigraph_answer(ox.parse_query_results(body, format=ox.QueryResultsFormat.from_media_type(media_type)))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparqlService]:
    yield from start(tmp_path_factory.mktemp("sparql"))


@pytest.fixture(scope="module")
def store() -> ox.Store:
    return oxigraph_store(NTRIPLES)


@pytest.fixture(scope="module")
def endpoint(service: SparqlService) -> httpx.Client:
    """A gateway with the default settings (but for the rate of new queries: see `gateway`)."""
    return service.gateway()


# -- the protocol --


def test_get_form_and_direct_post_give_the_oracle_answer(endpoint: httpx.Client, store: ox.Store) -> None:
    want = oxigraph_rows(store, LIKES)
    answers = [
        endpoint.get("/sparql/watdiv", params={"query": LIKES}),
        endpoint.post("/sparql/watdiv", data={"query": LIKES}),
        endpoint.post("/sparql/watdiv", content=LIKES, headers={"content-type": "application/sparql-query"}),
    ]
    for response in answers:
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/sparql-results+json"
        assert solutions(response.content, "application/sparql-results+json") == want


def test_the_default_dataset_and_unknown_parameters(endpoint: httpx.Client) -> None:
    """/sparql serves the dataset marked default; SPARQLWrapper's format/output/results are ignored."""
    query = f"ASK {{ ?s <{WSDBM}likes> ?o }}"
    params = {"query": query, "format": "json", "output": "json", "results": "json"}
    for path in ("/sparql", "/sparql/", "/sparql/other"):
        response = endpoint.get(path, params=params)
        assert response.status_code == 200 and response.json() == {"head": {}, "boolean": True}, path
    problem(endpoint.get("/sparql/nope", params={"query": query}), 404, "unknown-dataset")


@pytest.mark.parametrize(
    ("request_args", "status", "slug"),
    [
        ({"method": "POST", "data": {"format": "json"}}, 400, "invalid-request"),
        ({"method": "GET", "params": [("query", "ASK {}"), ("query", "ASK {}")]}, 400, "invalid-request"),
        ({"method": "POST", "params": {"query": "ASK {}"}, "data": {"query": "ASK {}"}}, 400, "invalid-request"),
        ({"method": "GET", "params": {"update": "CLEAR ALL"}}, 400, "invalid-request"),
        (
            {"method": "POST", "content": "ASK {}", "headers": {"content-type": "text/plain"}},
            415, "unsupported-media-type",
        ),
        ({"method": "POST", "content": "ASK {}"}, 415, "unsupported-media-type"),
        (
            {"method": "POST", "content": "ASK {}".encode("utf-16"),
             "headers": {"content-type": "application/sparql-query; charset=UTF-16"}},
            415, "unsupported-media-type",
        ),
        (
            {"method": "POST", "content": b"ASK { \xff }", "headers": {"content-type": "application/sparql-query"}},
            400, "invalid-request",
        ),
        (
            {"method": "POST", "content": "CLEAR ALL", "headers": {"content-type": "application/sparql-update"}},
            415, "unsupported-media-type",
        ),
    ],
)  # fmt: skip
def test_what_the_protocol_refuses(
    endpoint: httpx.Client, request_args: dict[str, Any], status: int, slug: str
) -> None:
    problem(endpoint.request(url="/sparql/watdiv", **request_args), status, slug)


def test_a_syntax_error_says_where(endpoint: httpx.Client) -> None:
    body = problem(endpoint.get("/sparql/watdiv", params={"query": "SELECT *\nWHERE { ?s ?p }"}), 400, "syntax-error")
    assert body["line"] == 2 and body["column"] >= 1


def test_other_methods_are_refused(endpoint: httpx.Client) -> None:
    for method in ("PUT", "HEAD"):
        response = endpoint.request(method, "/sparql/watdiv", params={"query": "ASK {}"})
        assert response.status_code == 405 and response.headers["allow"] == "GET, POST"
    assert response.headers["content-type"] == "application/problem+json"


def test_the_openapi_document_describes_the_endpoint(endpoint: httpx.Client) -> None:
    paths = endpoint.get("/openapi.json").json()["paths"]
    for path in ("/sparql", "/sparql/{dataset}"):
        get, post = paths[path]["get"], paths[path]["post"]
        assert "query" in {p["name"] for p in get["parameters"]}
        assert set(post["requestBody"]["content"]) == {"application/x-www-form-urlencoded", "application/sparql-query"}
        assert get["responses"]["400"]["content"]["application/problem+json"]["schema"]["$ref"].endswith(
            "/ProblemDetails"
        )
    assert paths["/sparql/{dataset}"]["get"]["parameters"][0]["name"] == "dataset"


# -- formats --


@pytest.mark.parametrize(
    "media_type", ["application/sparql-results+json", "application/sparql-results+xml", "text/tab-separated-values"]
)
def test_each_results_format(endpoint: httpx.Client, store: ox.Store, media_type: str) -> None:
    response = endpoint.get("/sparql/watdiv", params={"query": LIKES}, headers={"accept": media_type})
    assert response.status_code == 200 and response.headers["content-type"].startswith(media_type)
    assert response.headers["vary"].startswith("Accept")
    assert solutions(response.content, media_type) == oxigraph_rows(store, LIKES)


def test_a_one_piece_query_is_spliced_in_the_texts_column_order(endpoint: httpx.Client, store: ox.Store) -> None:
    """A query that is one server piece (its pages, written by the workers in the
    response's format, spliced) keeps SELECT *'s order: the text's."""
    query = f"SELECT * WHERE {{ ?o <{WSDBM}likes> ?s }}"
    lines: dict[str, int] = {}
    for media_type, head in [
        ("application/sparql-results+json", '{"head":{"vars":["o", "s"]}'),
        ("text/tab-separated-values", "?o\t?s"),
        ("text/csv", "o,s"),
    ]:
        response = endpoint.get("/sparql/watdiv", params={"query": query}, headers={"accept": media_type})
        assert response.status_code == 200 and response.text.startswith(head), response.text[:80]
        if media_type == "text/csv":  # pyoxigraph reads no CSV: as many rows as the TSV
            assert len(response.text.splitlines()) == lines["text/tab-separated-values"]
        else:
            assert solutions(response.content, media_type) == oxigraph_rows(store, query)
        lines[media_type] = len(response.text.splitlines())


def test_csv_and_ask_formats(endpoint: httpx.Client, store: ox.Store) -> None:
    response = endpoint.get("/sparql/watdiv", params={"query": LIKES}, headers={"accept": "text/csv"})
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    lines = response.text.splitlines()
    assert lines[0] == "s,o" and len(lines) - 1 == oxigraph_solutions(store, LIKES).total()
    ask = f"ASK {{ ?s <{WSDBM}likes> <{WSDBM}Product0> }}"
    for media_type in ("application/sparql-results+json", "application/sparql-results+xml"):
        response = endpoint.get("/sparql/watdiv", params={"query": ask}, headers={"accept": media_type})
        assert solutions(response.content, media_type) == oxigraph_rows(store, ask)


@pytest.mark.parametrize(
    "media_type", ["text/turtle", "application/n-triples", "application/rdf+xml", "application/ld+json"]
)
def test_each_graph_format(endpoint: httpx.Client, store: ox.Store, media_type: str) -> None:
    construct = f"CONSTRUCT {{ ?o <{WSDBM}likedBy> ?s }} WHERE {{ ?s <{WSDBM}likes> ?o }}"
    response = endpoint.get("/sparql/watdiv", params={"query": construct}, headers={"accept": media_type})
    assert response.status_code == 200 and response.headers["content-type"].startswith(media_type)
    got = {
        (t.subject, t.predicate, t.object) for t in ox.parse(response.content, ox.RdfFormat.from_media_type(media_type))
    }
    triples = store.query(construct)
    assert isinstance(triples, ox.QueryTriples)
    want = {(t.subject, t.predicate, t.object) for t in triples}
    assert got == want and len(got) > 1000


def test_describe(endpoint: httpx.Client) -> None:
    response = endpoint.get("/sparql/watdiv", params={"query": f"DESCRIBE <{WSDBM}User0>"})
    assert response.status_code == 200, response.text
    triples = list(ox.parse(response.content, ox.RdfFormat.TURTLE))
    assert triples and all(t.subject == ox.NamedNode(f"{WSDBM}User0") for t in triples)


def test_nothing_acceptable_is_406_before_anything_runs(service: SparqlService, endpoint: httpx.Client) -> None:
    before = service.tasks_queued()
    response = endpoint.get("/sparql/watdiv", params={"query": LIKES}, headers={"accept": "text/turtle"})
    assert "application/sparql-results+json" in problem(response, 406, "not-acceptable")["detail"]
    assert service.tasks_queued() == before


def test_the_service_description(endpoint: httpx.Client) -> None:
    response = endpoint.get("/sparql/watdiv")
    assert response.headers["content-type"] == "text/turtle; charset=utf-8"
    url = str(endpoint.base_url).rstrip("/") + "/sparql/watdiv"
    graph = ox.Store()
    graph.load(response.content, ox.RdfFormat.TURTLE)
    sd = "http://www.w3.org/ns/sparql-service-description#"
    assert graph.query(f"ASK {{ <{url}> a <{sd}Service> ; <{sd}endpoint> <{url}> ; <{sd}defaultDataset> ?d }}")
    as_jsonld = endpoint.get("/sparql/watdiv", headers={"accept": "application/ld+json"})
    assert len(list(ox.parse(as_jsonld.content, ox.RdfFormat.JSON_LD))) == len(graph)


# -- streaming --


def test_first_results_come_after_about_one_quantum(service: SparqlService, endpoint: httpx.Client) -> None:
    before = service.tasks_queued()
    with endpoint.stream("GET", "/sparql/watdiv", params={"query": EVERYTHING + " LIMIT 4000"}) as response:
        chunks = response.iter_bytes()
        first = next(chunks)
        queued_at_first = service.tasks_queued() - before
        rest = b"".join(chunks)
    # Sent as soon as the first quantum's rows were in, long before the end (100 quanta): a
    # loaded machine may let a few more quanta run before this test reads the count.
    assert b'"bindings":[{' in first
    assert queued_at_first <= 25, "the first results waited for later quanta"
    assert first.count(b'{"') < 1000 * 3 + 10, "the first chunk held most of the answer"
    assert len(json.loads(first + rest)["results"]["bindings"]) == 4000
    assert service.tasks_queued() - before >= 4000 // 40


def test_a_disconnect_stops_the_query_within_a_quantum(service: SparqlService, endpoint: httpx.Client) -> None:
    series = 'quanta_sparql_queries_total{form="select",outcome="disconnected"}'
    stopped = _metric(endpoint, series)
    before = service.quiet()  # no query of an earlier test still queues tasks
    with endpoint.stream("GET", "/sparql/watdiv", params={"query": EVERYTHING}) as response:
        next(response.iter_bytes())
    # The response is closed: the client has left, thousands of quanta before the end.
    deadline = time.monotonic() + 10
    while _metric(endpoint, series) == stopped:
        assert time.monotonic() < deadline, "the gateway never saw the client leave"
        time.sleep(0.02)
    at_stop = service.tasks_queued()
    time.sleep(1.0)
    # The disconnection is counted once the query has ended: no task of it is queued after.
    after = service.tasks_queued()
    assert after == at_stop, f"{after - at_stop} tasks queued for a client that left"
    assert at_stop - before < 200


def test_a_quantum_no_worker_replied_to_is_sent_again(service: SparqlService, store: ox.Store) -> None:
    """The worker stopped for longer than the reply timeout, before the query's first quantum and
    again mid-query: the gateway sends the same text, then the same saved plan, once it is back,
    and the answer has every row once."""
    gateway = service.gateway(reply_timeout_s=0.3)
    timeouts = 'quanta_sparql_quanta_total{status="reply-timeout"}'
    before = _metric(gateway, timeouts)
    _pause(service.worker)
    with gateway.stream("GET", "/sparql/watdiv", params={"query": LIKES}, headers={"Accept": JSON}) as response:
        chunks = response.iter_bytes()
        first = next(chunks)
        after_first = _metric(gateway, timeouts)
        _pause(service.worker).join()
        body = first + b"".join(chunks)
    assert response.status_code == 200
    assert solutions(body, JSON) == oxigraph_rows(store, LIKES)
    assert before < after_first < _metric(gateway, timeouts)


def _pause(worker: subprocess.Popen[bytes], seconds: float = 0.8) -> threading.Thread:
    """Stops `worker` now and lets it go on after `seconds`."""
    worker.send_signal(signal.SIGSTOP)
    resume = threading.Timer(seconds, worker.send_signal, (signal.SIGCONT,))
    resume.start()
    return resume


def _metric(client: httpx.Client, series: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


# -- the first quantum in the gateway (QUANTA_LOCAL_QUANTUM_MS) --


def _local(client: httpx.Client) -> dict[str, float]:
    series = 'quanta_gateway_local_quanta_total{{outcome="{}"}}'
    return {outcome: _metric(client, series.format(outcome)) for outcome in ("complete", "suspended")}


def test_a_small_query_is_answered_in_the_gateway(service: SparqlService, store: ox.Store) -> None:
    gateway = service.gateway(local_quantum_ms=500)
    small = f"SELECT ?o WHERE {{ <{WSDBM}User0> <{WSDBM}follows> ?o }}"
    ask = f"ASK {{ <{WSDBM}User0> <{WSDBM}follows> ?o }}"
    queued, before = service.quiet(), _local(gateway)
    for query in (small, ask):
        response = gateway.post("/sparql", data={"query": query}, headers={"Accept": JSON})
        assert response.status_code == 200, response.text
        assert solutions(response.content, JSON) == oxigraph_rows(store, query)
    assert service.tasks_queued() == queued, "no task went to the workers"
    assert _local(gateway)["complete"] == before["complete"] + 2


def test_a_long_query_goes_on_on_the_workers(service: SparqlService, store: ox.Store) -> None:
    """A first quantum of 40 rows (the dataset's page) or 1 ms, suspended in the gateway: the
    workers resume its saved plan, spliced (one piece) or under the gateway's own operators."""
    gateway = service.gateway(local_quantum_ms=1)
    grouped = f"SELECT ?s (COUNT(?o) AS ?n) WHERE {{ ?s <{WSDBM}likes> ?o }} GROUP BY ?s"
    for query in (LIKES, grouped):
        queued, before = service.quiet(), _local(gateway)
        response = gateway.post("/sparql/watdiv", data={"query": query}, headers={"Accept": JSON})
        assert response.status_code == 200, response.text
        assert solutions(response.content, JSON) == oxigraph_rows(store, query)
        assert service.quiet() > queued + 1, "the rest ran on the workers"
        assert _local(gateway)["suspended"] == before["suspended"] + 1


def test_the_first_quantum_waits_for_a_side_index_and_keeps_to_its_share(tmp_path: Path) -> None:
    """Without its side index, a file is the workers' (the gateway never builds one); once a
    worker built it, the next `open` maps it. Past its share of time, first quanta go to the queue."""
    shutil.copy(SAMPLE, tmp_path / "bare.hdt")
    (tmp_path / "catalog.toml").write_text('[datasets.bare]\npath = "bare.hdt"\n')
    catalog = load_catalog(tmp_path / "catalog.toml")
    first = FirstQuantum(catalog, quantum_ms=5, share=0.01, worker="test")
    request = SubRequest("bare", query=f"SELECT ?o WHERE {{ <{WSDBM}User0> <{WSDBM}follows> ?o }}")
    assert not first.open() and first.run(request) is None
    open_store(str(tmp_path / "bare.hdt"))  # what a worker does at its start: builds the side index
    assert first.open()
    ran = 0
    started = time.perf_counter()
    while (local := first.run(request)) is not None:  # a burst of 10 quanta of 5 ms, refilled at 1% of the time
        page, plan = local
        assert plan is None and page.next is None and page.stats["worker"] == "test"
        ran += 1
        assert time.perf_counter() - started < 10, "the share is never spent"
    assert ran > 0


def test_a_query_sent_whole_that_the_local_quantum_does_not_finish_goes_on_from_its_plan(tmp_path: Path) -> None:
    """The gateway's first quantum is shorter than the workers': a query the smart client sends
    whole that it does not finish goes on from its saved plan, like any other; one it cannot run
    whole (a value it cannot order) is `unfinished` at once, as it would be on a worker."""
    shutil.copy(SAMPLE, tmp_path / "w.hdt")
    (tmp_path / "catalog.toml").write_text('[datasets.w]\npath = "w.hdt"\n')
    open_store(str(tmp_path / "w.hdt"))  # its side index, as a worker builds it
    catalog = load_catalog(tmp_path / "catalog.toml")
    grouped = f"SELECT ?s (COUNT(*) AS ?n) WHERE {{ ?s <{WSDBM}follows> ?o . ?o <{WSDBM}likes> ?p }} GROUP BY ?s"
    request = SubRequest("w", query=grouped, whole=True)
    short, long = (FirstQuantum(catalog, quantum_ms=ms, share=1, worker="test") for ms in (0.01, 1000))
    assert short.open() and long.open()
    counted = ("quanta_gateway_local_quanta_total", {"outcome": "unfinished"})
    before = REGISTRY.get_sample_value(*counted) or 0
    suspended = short.run(request)
    assert suspended is not None and suspended[1] is not None and not suspended[0].rows
    decimal = f"SELECT ?o WHERE {{ ?s <{WSDBM}follows> ?o }} ORDER BY (STRLEN(STR(?o)) / 7) LIMIT 3"
    with pytest.raises(QueryError) as unfinished:
        short.run(SubRequest("w", query=decimal, whole=True))
    assert unfinished.value.kind is ErrorKind.UNFINISHED
    assert REGISTRY.get_sample_value(*counted) == before + 1
    ran = long.run(request)
    assert ran is not None and ran[1] is None and ran[0].rows, "finished whole, in one page"
    with pytest.raises(QueryError) as refused:  # a refusal is still the engine's answer
        short.run(SubRequest("w", query="SELECT (GROUP_CONCAT(?o) AS ?g) WHERE { ?s ?p ?o }", whole=True))
    assert refused.value.kind is ErrorKind.UNSUPPORTED_OPERATOR


# -- fair use --


def test_a_client_runs_at_most_its_cap_of_queries(service: SparqlService) -> None:
    known = hashlib.sha256(b"capped").hexdigest() + "," + hashlib.sha256(b"someone-else").hexdigest()
    capped = service.gateway("capped", sparql_max_queries=1, api_key_hashes=known)  # two authenticated keys
    with capped.stream("GET", "/sparql/watdiv", params={"query": EVERYTHING}) as running:
        chunks = running.iter_bytes()  # kept: a dropped iterator closes the connection
        next(chunks)
        refused = capped.get("/sparql/watdiv", params={"query": LIKES})
        assert problem(refused, 429, "too-many-queries")["retry_after"] == 1
        assert refused.headers["retry-after"] == "1"
        other_client = capped.get("/sparql/watdiv", params={"query": LIKES}, headers={"x-api-key": "someone-else"})
        assert other_client.status_code == 200
    deadline = time.monotonic() + 5
    while (answer := capped.get("/sparql/watdiv", params={"query": LIKES})).status_code == 429:
        assert time.monotonic() < deadline, "the first query's place was never given back"
        time.sleep(0.05)
    assert answer.status_code == 200


def test_new_queries_are_rate_limited_but_not_their_quanta(service: SparqlService) -> None:
    """A burst of 2 new queries, refilled every 1000 s; each quantum would be over a
    rate of 1 task/s (burst 1), yet a query of dozens of quanta completes."""
    limited = service.gateway("limited", sparql_query_rate=0.001, sparql_query_burst=2, rate_limit=1, rate_burst=1)
    before = service.tasks_queued()
    for _ in range(2):
        assert limited.get("/sparql/watdiv", params={"query": LIKES}).status_code == 200
    assert service.tasks_queued() - before > 20, "the query did not span many quanta"
    refused = limited.get("/sparql/watdiv", params={"query": LIKES})
    assert problem(refused, 429, "rate-limited")["retry_after"] >= 1


# -- browsers --


def test_cors_lets_a_page_on_another_origin_query(endpoint: httpx.Client, service: SparqlService) -> None:
    origin = "https://yasgui.example"
    preflight = endpoint.options(
        "/sparql/watdiv",
        headers={"origin": origin, "access-control-request-method": "POST",
                 "access-control-request-headers": "content-type,x-api-key"},
    )  # fmt: skip
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "x-api-key" in preflight.headers["access-control-allow-headers"].lower()
    answer = endpoint.post("/sparql/watdiv", data={"query": LIKES}, headers={"origin": origin})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "*"
    closed = service.gateway(cors_origins="").post("/sparql/watdiv", data={"query": LIKES}, headers={"origin": origin})
    assert "access-control-allow-origin" not in closed.headers


# -- metrics --


def test_metrics_count_queries_quanta_and_bytes(endpoint: httpx.Client) -> None:
    completed = 'quanta_sparql_queries_total{form="select",outcome="completed"}'
    before = _metric(endpoint, completed), _metric(endpoint, 'quanta_sparql_quanta_total{status="ok"}')
    sent = _metric(endpoint, 'quanta_sparql_streamed_bytes_total{format="tsv"}')
    body = endpoint.get("/sparql/watdiv", params={"query": LIKES}, headers={"accept": "text/tab-separated-values"})
    deadline = time.monotonic() + 2  # counted as the query closes, just after the last byte went out
    while _metric(endpoint, completed) == before[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _metric(endpoint, completed) == before[0] + 1
    assert _metric(endpoint, 'quanta_sparql_quanta_total{status="ok"}') > before[1] + 20
    assert _metric(endpoint, 'quanta_sparql_streamed_bytes_total{format="tsv"}') == sent + len(body.content)
    assert _metric(endpoint, "quanta_sparql_first_result_seconds_count") >= 1


# -- SERVICE --

FEDERATED = f"""SELECT ?s ?o ?price WHERE {{
  ?s <{WSDBM}likes> ?o .
  SERVICE <REMOTE> {{ ?o <http://purl.org/goodrelations/price> ?price }}
}}"""


def test_service_is_refused_without_an_allowlist(service: SparqlService, endpoint: httpx.Client) -> None:
    before = service.tasks_queued()
    query = FEDERATED.replace("REMOTE", "http://example.org/sparql")
    response = endpoint.get("/sparql/watdiv", params={"query": query})
    assert problem(response, 403, "service-not-allowed")
    assert service.tasks_queued() == before, "nothing runs for a refused query"


def test_an_allowlisted_service_is_joined(service: SparqlService, store: ox.Store) -> None:
    """The remote endpoint is another dataset's /sparql, on a gateway of its own: a real SPARQL endpoint
    over HTTP. Without fair-use limits: the bind join sends it a query per block of bindings."""
    remote_gateway = service.gateway(sparql_query_rate=0, sparql_max_queries=0)
    remote = str(remote_gateway.base_url).rstrip("/") + "/sparql/other"
    federated = service.gateway(service_allowlist=remote)
    response = federated.get("/sparql/watdiv", params={"query": FEDERATED.replace("REMOTE", remote)})
    assert response.status_code == 200, response.text
    local = FEDERATED.replace("SERVICE <REMOTE>", "")
    assert solutions(response.content, "application/sparql-results+json") == oxigraph_rows(store, local)
