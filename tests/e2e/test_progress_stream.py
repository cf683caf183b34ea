"""The progress stream (`Accept: text/event-stream` on /sparql, the query
page's channel) against a real service: Redis, two workers and the gateway,
at a 2 ms quantum with 40 rows a page, so a query spans many quanta."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import redis

from quanta.common import keys

SERVICE_OPTIONS = {"quantum_ms": 2, "max_results": 40}
WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"
LIKES = f"SELECT ?s ?o WHERE {{ ?s <{WSDBM}likes> ?o }}"  # 1,133 rows: 29 pages of 40
SORTED = f"SELECT ?s ?o WHERE {{ ?s <{WSDBM}likes> ?o }} ORDER BY DESC(?o) ?s"
EVENTS = {"Accept": "text/event-stream"}

Event = tuple[str, Any]


def events(lines: Iterator[str]) -> Iterator[Event]:
    """Server-Sent Events as (name, JSON data), as the page reads them."""
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: ") :])


def run(url: str, query: str) -> list[Event]:
    with httpx.stream("POST", f"{url}/sparql/watdiv", data={"query": query}, headers=EVENTS, timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        return list(events(response.iter_lines()))


def tasks_queued(redis_url: str) -> int:
    info: dict[str, Any] = redis.Redis.from_url(redis_url).xinfo_stream(keys.TASKS)
    return int(info["entries-added"])


def test_one_event_per_quantum_and_the_rows_between(module_service) -> None:
    before = tasks_queued(module_service.redis.url)
    got = run(module_service.url, LIKES)
    assert got[0] == ("head", {"form": "select", "vars": ["s", "o"]})
    quanta = [data for name, data in got if name == "quantum"]
    assert [q["quanta"] for q in quanta] == list(range(1, len(quanta) + 1))
    assert {q["worker"] for q in quanta} <= {"e2e-worker-0", "e2e-worker-1"}
    assert all(q["status"] == "ok" and q["elapsed_ms"] > 0 and q["partial"] is False for q in quanta)
    assert len(quanta) == tasks_queued(module_service.redis.url) - before >= 1133 // 40
    rows = [row for name, data in got if name == "results" for row in data]
    plain = httpx.post(f"{module_service.url}/sparql/watdiv", data={"query": LIKES}, timeout=60).json()
    assert sorted(map(json.dumps, rows)) == sorted(map(json.dumps, plain["results"]["bindings"]))
    assert got[-1][0] == "end" and got[-1][1]["quanta"] == len(quanta)


def test_quanta_stream_while_a_sort_reads_its_input(module_service) -> None:
    """The first quantum's event arrives while the query still runs, long before its first row (the
    query is sorted whole on the workers, then handed on 40 rows a page)."""
    before = tasks_queued(module_service.redis.url)
    with httpx.stream(
        "POST", f"{module_service.url}/sparql/watdiv", data={"query": SORTED}, headers=EVENTS, timeout=60
    ) as response:
        stream = events(response.iter_lines())
        assert next(stream)[0] == "head"
        name, first = next(stream)
        queued_then = tasks_queued(module_service.redis.url) - before
        rest = list(stream)
    assert name == "quantum" and first["quanta"] == 1 and first["whole"]
    total = rest[-1][1]["quanta"]
    assert total >= 1133 // 40 and queued_then < total / 2, (queued_then, total)
    names = [name for name, _ in rest]
    assert names.index("results") > names.index("quantum") and names[-1] == "end"


def test_quanta_say_where_an_operator_ran(module_service) -> None:
    """A GROUP BY shipped to the workers: its quanta say so (`partial`), and its counts add up. The
    query was sent whole first (`whole`): its quanta until the worker found a value it cannot
    order (a decimal), then `unfinished`."""
    grouped = f"SELECT ?o (COUNT(*) AS ?n) WHERE {{ ?s <{WSDBM}likes> ?o }} GROUP BY ?o ORDER BY (?n / 7)"
    got = run(module_service.url, grouped)
    reports = [data for name, data in got if name == "quantum"]
    tried = [q for q in reports if q["whole"]]
    quanta = reports[len(tried) :]
    assert tried[-1]["status"] == "unfinished" and all(q["status"] == "ok" for q in tried[:-1])
    assert quanta and all(q["partial"] is True and not q["whole"] for q in quanta)
    rows = [row for name, data in got if name == "results" for row in data]
    every = f"SELECT ?s ?o WHERE {{ ?s <{WSDBM}likes> ?o }}"
    plain = httpx.post(f"{module_service.url}/sparql/watdiv", data={"query": every}, timeout=60).json()
    assert sum(int(row["n"]["value"]) for row in rows) == len(plain["results"]["bindings"]) > 1000


def test_graphs_and_booleans(module_service) -> None:
    graph = run(module_service.url, f"CONSTRUCT {{ ?s <{WSDBM}likes> ?o }} WHERE {{ ?s <{WSDBM}likes> ?o }} LIMIT 5")
    assert graph[0] == ("head", {"form": "construct", "vars": ["subject", "predicate", "object"]})
    triples = [row for name, data in graph if name == "results" for row in data]
    assert len(triples) == 5 and all(t["predicate"]["value"] == WSDBM + "likes" for t in triples)
    ask = run(module_service.url, f"ASK {{ ?s <{WSDBM}likes> ?o }}")
    assert ("boolean", True) in ask and ask[-1][0] == "end"


def test_a_syntax_error_is_a_problem_before_any_event(module_service) -> None:
    response = httpx.post(
        f"{module_service.url}/sparql/watdiv", data={"query": "SELECT ?s\nWHERE { ?s ?p }"}, headers=EVENTS
    )
    assert response.status_code == 400 and response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"].endswith("/syntax-error") and problem["line"] == 2 and problem["column"] > 1


def test_a_failure_once_streaming_is_an_error_event(make_service) -> None:
    """A sort past its budgets fails after quanta were sent: the stream says so and ends properly (the
    client's sort: the workers cannot order a decimal)."""
    service = make_service(quantum_ms=2, max_results=40, QUANTA_SPARQL_MEMORY_ROWS="50", QUANTA_SPARQL_DISK_BYTES="0")
    got = run(service.url, f"SELECT ?s ?o WHERE {{ ?s <{WSDBM}likes> ?o }} ORDER BY (STRLEN(STR(?o)) / 7)")
    assert got[1][0] == "quantum"
    name, problem = got[-1]
    assert name == "error" and problem["type"].endswith("/budget-exceeded") and problem["title"]
    assert "results" not in [name for name, _ in got]
