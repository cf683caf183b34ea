"""Progress you can see, against a real service (Redis, two workers, the gateway; 2 ms quanta):
each /v1 page's stats carry the estimated fraction done and the time left, the /sparql progress
stream's quantum events carry them too, and the estimate's error is a Prometheus histogram once
a query completes."""

from __future__ import annotations

import re
from typing import Any

import httpx

from .test_progress_stream import EVENTS, events

SERVICE_OPTIONS = {"quantum_ms": 2, "max_results": 1000}
W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
CHAIN = f"SELECT ?s ?f ?o WHERE {{ ?s <{W}friendOf> ?f . ?f <{W}likes> ?o }}"  # 44,997 rows: 45 pages of 1,000


def test_v1_pages_carry_progress_and_time_left(module_service) -> None:
    url = f"{module_service.url}/v1/datasets/watdiv/query"
    pages: list[dict[str, Any]] = []
    body: dict[str, str] = {"query": CHAIN}
    with httpx.Client(timeout=30) as http:
        while True:
            page = http.post(url, json=body).raise_for_status().json()
            pages.append(page["stats"])
            if page["next"] is None:
                break
            body = {"next": page["next"]}
    assert len(pages) >= 45
    fractions = [s["progress"] for s in pages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and pages[-1]["eta_ms"] == 0.0
    assert 0 < fractions[0] < 0.1 and all(0 < f < 1 for f in fractions[:-1]) and fractions[-2] > 0.9
    # the time left is elapsed * (1 - f) / f, elapsed being the service's time on the query so far:
    # every page's round trip, carried from page to page by the signed token (rounded to the ms)
    elapsed = 0.0
    for i, s in enumerate(pages[:-1]):
        elapsed += s["round_trip_ms"]
        f = s["progress"]
        expected = elapsed * (1 - f) / f
        assert abs(s["eta_ms"] - expected) <= (i + 1) * (1 - f) / f + 0.1 + expected * 1e-5, (i, s, expected)
    # the estimate tracks the work: halfway through the pages, about halfway done
    assert 0.3 < fractions[len(fractions) // 2] < 0.7


def quantum_events(service_url: str, query: str) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{service_url}/sparql/watdiv", data={"query": query}, headers=EVENTS, timeout=60) as r:
        assert r.status_code == 200, r.read()
        got = list(events(r.iter_lines()))
    assert got[-1][0] == "end"
    return [data for name, data in got if name == "quantum"]


def estimate_errors(service_url: str) -> tuple[int, float]:
    """The histogram's count and its bucket le="0" (estimates at or behind the truth)."""
    text = httpx.get(f"{service_url}/metrics").text
    count = re.search(r"^quanta_progress_estimate_error_count (\S+)$", text, re.M)
    behind = re.search(r'^quanta_progress_estimate_error_bucket\{le="0\.0"\} (\S+)$', text, re.M)
    assert count is not None and behind is not None, text
    return int(float(count.group(1))), float(behind.group(1))


def test_the_progress_stream_carries_them_and_the_error_is_measured(module_service) -> None:
    before, _ = estimate_errors(module_service.url)
    quanta = quantum_events(module_service.url, CHAIN)  # one server piece: it drives the query
    assert len(quanta) >= 45
    fractions = [q["progress"] for q in quanta]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and quanta[-1]["eta_ms"] == 0.0
    assert all(0 < f < 1 and q["eta_ms"] > 0 for f, q in zip(fractions[:-1], quanta, strict=False))
    # each suspended quantum of the completed query: one observation of the estimate's error
    after, _ = estimate_errors(module_service.url)
    assert after - before == len(quanta) - 1


def test_a_split_query_reports_its_driving_piece(module_service) -> None:
    """A sort runs in the gateway over one server piece: the quanta report that piece's progress
    (a JSON null before it has any, never a made-up number)."""
    # the gateway's sort: its decimal key is one the workers cannot order (they would sort it whole)
    quanta = quantum_events(module_service.url, CHAIN + " ORDER BY DESC(?o) (STRLEN(STR(?s)) / 7)")
    tried, *quanta = quanta  # the query sent whole first, unfinished at its first row
    assert tried["whole"] and tried["status"] == "unfinished" and tried["progress"] is None
    fractions = [q["progress"] for q in quanta]
    assert len(quanta) >= 45 and fractions == sorted(fractions) and fractions[-1] == 1.0
    # a query whose leftmost operand runs in the gateway has no driving piece: null throughout
    # (a NOT EXISTS the workers do not run, over an OPTIONAL: bound by blocks of the VALUES' rows)
    absent = f"{{ ?s <{W}likes> ?o OPTIONAL {{ ?o <{W}hasGenre> ?g }} }}"
    values = f"SELECT * WHERE {{ VALUES ?s {{ <{W}User0> }} FILTER NOT EXISTS {absent} }}"
    quanta = quantum_events(module_service.url, values)
    assert quanta and all(q["progress"] is None and q["eta_ms"] is None for q in quanta)
