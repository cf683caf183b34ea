"""End to end through the gateway with 2 workers: the WatDiv 100K basic
queries give pyoxigraph's answers, by value and by reference, at a 2 ms
quantum; a worker SIGKILLed mid-quantum loses no query; a Redis restart
loses no query sent with plans by value."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pyoxigraph as ox
import pytest

from quanta.client import QuantaClient
from quanta.sparql.reader import row_from_json
from quanta.testkit.data import shared_dir
from quanta.testkit.oracle import Solution, as_multiset, oxigraph_rows, oxigraph_solutions, oxigraph_store

WATDIV = shared_dir() / "datasets" / "watdiv"
QUERIES = sorted((WATDIV / "queries" / "basic").glob("*.rq"))


def solutions(bindings: list[dict[str, dict[str, str]]]) -> Counter[Solution]:
    """Bindings as `oxigraph_rows` has them: read into terms, compared in N-Triples."""
    head = sorted({v for b in bindings for v in b})
    return as_multiset(head, [row_from_json(head, b) for b in bindings])


@pytest.fixture(scope="module")
def reference() -> ox.Store:
    store = oxigraph_store(WATDIV / "watdiv-100k.nt.gz")
    return store


@pytest.mark.parametrize("plan", ["value", "reference"])
def test_watdiv_basic_queries_end_to_end(service, reference: ox.Store, plan: str) -> None:
    assert len(QUERIES) == 200
    with QuantaClient(service.url) as client:
        suspended = longer_than_a_page = 0
        for path in QUERIES:
            query = path.read_text()
            pages = list(client.pages("watdiv", query, plan=plan))
            suspended += len(pages) > 1
            expected = oxigraph_solutions(reference, query)
            longer_than_a_page += expected.total() > service.max_results
            got = solutions([b for p in pages for b in p.bindings])
            assert got == expected, path.name
        # how many more a 2 ms quantum suspends depends on the machine's speed
        assert longer_than_a_page >= 5 and suspended >= longer_than_a_page


def run_queries(
    url: str, queries: list[Path], results: dict[str, Counter[Solution]], errors: list[BaseException]
) -> None:
    try:
        with QuantaClient(url) as client:
            for path in queries:
                results[path.name] = solutions(list(client.query("watdiv", path.read_text(), plan="value")))
    except BaseException as e:
        errors.append(e)


HEAVY = [p for p in QUERIES if p.stem.split("_")[0] in ("C3", "C1", "F5", "L5", "S1")]


def test_sigkill_a_worker_mid_quantum(make_service, reference: ox.Store) -> None:
    service = make_service(workers=3, quantum_ms=20, QUANTA_REPLY_TIMEOUT_S="30")
    results: dict[str, Counter[Solution]] = {}
    errors: list[BaseException] = []
    threads = [threading.Thread(target=run_queries, args=(service.url, HEAVY[i::3], results, errors)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    for victim in service.workers[:2]:  # kill two of three, mid-quantum, one after the other
        victim.send_signal(signal.SIGKILL)
        time.sleep(0.5)
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert set(results) == {p.name for p in HEAVY}
    for path in HEAVY:
        assert results[path.name] == oxigraph_rows(reference, path.read_text()), path.name


def test_redis_restart_loses_no_query_by_value(make_service, reference: ox.Store) -> None:
    service = make_service(workers=2, quantum_ms=5, max_results=100)
    query = next(p for p in QUERIES if p.stem == "C3_1").read_text()
    with QuantaClient(service.url, max_retries=100) as client:
        pages = client.pages("watdiv", query, plan="value")
        bindings = list(next(pages).bindings)
        service.redis.restart()  # empty, as a Redis without persistence comes back
        for page in pages:
            bindings += page.bindings
    assert solutions(bindings) == oxigraph_rows(reference, query)
