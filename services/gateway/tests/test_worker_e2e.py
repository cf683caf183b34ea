"""The gateway in front of a real `quanta worker` process over the sample dataset: queries run
to completion by following `next`, by value and by reference, and worker errors keep their types."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from quanta.common import keys
from quanta.common.redis_server import RedisServer, redis_server
from quanta.gateway.config import Settings
from quanta.testkit.gateway import Served, problem

pytest.importorskip("quanta.worker", reason="services/worker is not installed")

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
QUERY = """SELECT ?product ?caption WHERE {
  ?product <http://schema.org/caption> ?caption .
  ?product <http://purl.org/stuff/rev#hasReview> ?review .
}"""


@dataclass
class Service:
    client: httpx.Client
    redis: redis.Redis


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    folder = tmp_path_factory.mktemp("e2e")
    shutil.copy(SAMPLE, folder / "watdiv-100k.hdt")  # the worker writes its side index next to it
    catalog = folder / "catalog.toml"
    catalog.write_text(
        '[datasets.watdiv]\npath = "watdiv-100k.hdt"\nquantum_ms = 2\nmax_results = 40\n'
        '[datasets.whole]\npath = "watdiv-100k.hdt"\nquantum_ms = inf\nmax_results = 100000\n'
    )
    with redis_server() as server:
        worker = _start_worker(server, catalog)
        secret_keys = "e2e:0123456789abcdef01234567"
        settings = Settings.from_env(catalog=catalog, redis={"url": server.url}, secret_keys=secret_keys)
        served = Served(settings)
        try:
            yield Service(served.client, redis.Redis.from_url(server.url))
        finally:
            served.stop()
            worker.terminate()
            worker.wait(timeout=20)


def _start_worker(server: RedisServer, catalog: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "QUANTA_REDIS_URL": server.url}
    # An explicit reclaim time: the default (10 quanta) is undefined with an infinite quantum.
    command = [
        sys.executable,
        "-m",
        "quanta.cli.main",
        "worker",
        "--catalog",
        str(catalog),
        "--reclaim-idle-ms",
        "5000",
    ]
    worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + 120  # the first start builds the side index
    while client.zcard(keys.WORKERS) == 0:
        assert worker.poll() is None, "worker exited"
        assert time.monotonic() < deadline, "worker did not start"
        time.sleep(0.05)
    return worker


def run(
    client: httpx.Client, dataset: str, query: str, plan: str | None = None, partial: bool = False, whole: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    body: dict[str, Any] = {"query": query} | ({"plan": plan} if plan else {})
    body |= ({"partial": True} if partial else {}) | ({"whole": True} if whole else {})
    pages = []
    while True:
        response = client.post(f"/v1/datasets/{dataset}/query", json=body)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        if pages[-1]["next"] is None:
            return pages, [b for p in pages for b in p.get("results", {}).get("bindings", [])]
        body = {"next": pages[-1]["next"]}


def bag(bindings: list[dict[str, Any]]) -> Counter[str]:
    return Counter(repr(sorted((k, tuple(sorted(v.items()))) for k, v in b.items())) for b in bindings)


def test_query_to_completion_by_value_and_by_reference(e2e: Service) -> None:
    service = e2e.client
    assert service.get("/readyz").json()["status"] == "ready"
    whole_pages, whole = run(service, "whole", QUERY)
    assert len(whole_pages) == 1 and len(whole) > 100
    by_value_pages, by_value = run(service, "watdiv", QUERY, plan="value")
    by_ref_pages, by_ref = run(service, "watdiv", QUERY, plan="reference")
    assert len(by_value_pages) > 3 and len(by_ref_pages) > 3
    assert bag(by_value) == bag(whole) == bag(by_ref)
    assert {p["stats"]["plan"] for p in by_value_pages[:-1]} == {"value"}
    assert {p["stats"]["plan"] for p in by_ref_pages[:-1]} == {"reference"}
    assert all(p["head"] == {"vars": ["product", "caption"]} for p in by_value_pages)
    assert by_value_pages[0]["stats"]["worker"] and by_value_pages[0]["stats"]["plan_bytes"] > 0


def test_ask(e2e: Service) -> None:
    pages, _ = run(e2e.client, "watdiv", "ASK { ?s <http://schema.org/caption> ?o }")
    assert pages[-1]["boolean"] is True and pages[-1]["head"] == {}


def test_worker_errors_keep_their_types(e2e: Service) -> None:
    service = e2e.client
    syntax = problem(service.post("/v1/datasets/watdiv/query", json={"query": "SELECT * WHERE {\n  ?s ?p \n"}),
                     400, "syntax-error")  # fmt: skip
    assert syntax["line"] >= 1 and syntax["column"] >= 1
    order = service.post("/v1/datasets/watdiv/query", json={"query": "SELECT * { ?s ?p ?o } ORDER BY ?o"})
    assert problem(order, 422, "unsupported-operator")["operator"] == "ORDER BY"
    first = service.post("/v1/datasets/watdiv/query", json={"query": QUERY, "plan": "reference"}).json()
    for key in e2e.redis.scan_iter(keys.plan("*")):
        e2e.redis.delete(key)  # as if every kept plan had expired
    problem(service.post("/v1/datasets/watdiv/query", json={"next": first["next"]}), 410, "plan-expired")
    by_value = service.post("/v1/datasets/watdiv/query", json={"query": QUERY, "plan": "value"}).json()
    problem(service.post("/v1/datasets/whole/query", json={"next": by_value["next"]}), 409, "dataset-mismatch")


def test_partial_answers_merge_into_the_answer(e2e: Service) -> None:
    """`partial`: a GROUP BY with COUNT(*) answered per quantum, counted rows that add up (by value and by
    reference); a DISTINCT's pages each distinct. Without `partial`, both stay outside the fragment."""
    grouped = "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p"
    _, whole = run(e2e.client, "whole", grouped, partial=True)  # one quantum: the answer itself
    for plan in ("value", "reference"):
        pages, counted = run(e2e.client, "watdiv", grouped, plan=plan, partial=True)
        assert len(pages) > 3
        totals: Counter[str] = Counter()
        for row in counted:
            totals[row["p"]["value"]] += int(row["n"]["value"])
        assert totals == {row["p"]["value"]: int(row["n"]["value"]) for row in whole}
        assert sum(totals.values()) > 100_000
    distinct = "SELECT DISTINCT ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/follows> ?o }"
    pages, rows = run(e2e.client, "watdiv", distinct, partial=True)
    assert all(len(bag(p["results"]["bindings"])) == len(p["results"]["bindings"]) for p in pages)
    _, plain = run(e2e.client, "whole", "SELECT ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/follows> ?o }")
    assert set(bag(rows)) == set(bag(plain)) and len(rows) < len(plain)
    refused = e2e.client.post("/v1/datasets/watdiv/query", json={"query": grouped})
    assert problem(refused, 422, "unsupported-operator")["operator"] == "GROUP BY"
    # with `next`, `partial` changes nothing: the token continues the query as it began
    again = e2e.client.post("/v1/datasets/watdiv/query", json={"next": pages[0]["next"], "partial": False})
    assert again.status_code == 200 and again.json()["results"] == pages[1]["results"]


def test_a_query_run_whole(e2e: Service) -> None:
    """`whole`: every operator on the worker, suspended and resumed (2 ms quanta over 100,000
    triples: what the operators gathered is in the saved plan) to the same answer; 422
    `unfinished` when the worker cannot run it whole (a value it cannot order),
    `unsupported-operator` for an operator a worker does not run whole."""
    top = (
        "SELECT ?p ?n WHERE { { SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p } } "
        "ORDER BY DESC(?n) ?p LIMIT 3"
    )
    response = e2e.client.post("/v1/datasets/whole/query", json={"query": top, "whole": True})
    assert response.status_code == 200, response.text
    page = response.json()
    counts = [int(b["n"]["value"]) for b in page["results"]["bindings"]]
    assert page["next"] is None and len(counts) == 3 and counts == sorted(counts, reverse=True)
    _, grouped = run(e2e.client, "whole", "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p", partial=True)
    assert counts == sorted((int(b["n"]["value"]) for b in grouped), reverse=True)[:3]
    pages, preempted = run(e2e.client, "watdiv", top, whole=True)
    assert len(pages) > 1 and not pages[0]["results"]["bindings"] and preempted == page["results"]["bindings"]
    decimal = "SELECT ?o WHERE { ?s <http://purl.org/stuff/rev#rating> ?o } ORDER BY (xsd:decimal(?o) / 3) LIMIT 3"
    decimal = "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> " + decimal
    problem(e2e.client.post("/v1/datasets/whole/query", json={"query": decimal, "whole": True}), 422, "unfinished")
    joined = "SELECT (GROUP_CONCAT(?o) AS ?s) WHERE { ?s <http://purl.org/stuff/rev#rating> ?o }"
    refused = e2e.client.post("/v1/datasets/whole/query", json={"query": joined, "whole": True})
    assert problem(refused, 422, "unsupported-operator")["operator"] == "GROUP_CONCAT"
