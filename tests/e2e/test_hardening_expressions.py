"""Every expression is bounded (issue 17, findings 1, 2 and 5), against a real service: a
catastrophic regular expression answers at once, in a worker (/v1) and in the gateway's smart
client (/sparql, above an OPTIONAL or in HAVING), and a string, or an integer, built past its limit
fails the query with a 422 `expression-limit`, while a bystander's small query keeps answering
within a second and no process grows past MAX_RSS_MB."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from .conftest import Service, bystander

# The attacker and the bystander share an address: no rate limit, so only the attack can slow the bystander.
SERVICE_OPTIONS = {"QUANTA_SPARQL_QUERY_RATE": "0", "QUANTA_RATE_LIMIT": "0"}
QUERY_PATH = "/v1/datasets/watdiv/query"
LIKES = "<http://db.uwaterloo.ca/~galuc/wsdbm/likes>"
MAX_RSS_MB = 250  # each process; about 65 (worker) and 85 (gateway) at rest
ALMOST = "a" * 40 + "!"  # 40 a's: days of backtracking for Python's re

CATASTROPHIC = ["^(a+)+$", "(a|aa)+$", "(.*a){20}$", "^(a|a?)+$"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def peak_rss(service: Service) -> Iterator[dict[str, float]]:
    """The highest RSS (MB) of the gateway and each worker while the block runs, sampled every 20 ms."""
    assert service.gateway is not None
    pids = {"gateway": service.gateway.pid, **{f"worker{i}": w.pid for i, w in enumerate(service.workers)}}
    peak = dict.fromkeys(pids, 0.0)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for name, pid in pids.items():
                peak[name] = max(peak[name], rss_mb(pid))
            done.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


def run(service: Service, route: str, query: str) -> httpx.Response:
    with httpx.Client(base_url=service.url, timeout=30) as http:
        if route == "v1":
            return http.post(QUERY_PATH, json={"query": query})
        return http.post("/sparql", data={"query": query}, headers={"Accept": "application/sparql-results+json"})


def attack(service: Service, route: str, query: str, max_rss_mb: float = MAX_RSS_MB) -> tuple[httpx.Response, float]:
    """The attacker's answer and its seconds; asserts the bystander and the processes' memory."""
    with peak_rss(service) as peak, bystander(service.url) as seen:
        time.sleep(0.3)
        started = time.perf_counter()
        response = run(service, route, query)
        took = time.perf_counter() - started
        time.sleep(0.3)
    assert not seen.failures, seen.failures[:3]
    assert seen.worst < 1.0, f"a small query waited {seen.worst:.2f} s"
    assert max(peak.values()) < max_rss_mb, peak
    return response, took


def bindings(response: httpx.Response) -> list[dict[str, object]]:
    assert response.status_code == 200, response.text[:300]
    rows: list[dict[str, object]] = response.json()["results"]["bindings"]
    return rows


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_regex_in_a_worker_answers_at_once(module_service: Service, pattern: str) -> None:
    query = f'SELECT ?x WHERE {{ BIND("{ALMOST}" AS ?x) FILTER(REGEX(?x, "{pattern}")) }}'
    response, took = attack(module_service, "v1", query)
    assert bindings(response) == []
    assert took < 5


@pytest.mark.parametrize("pattern", CATASTROPHIC)
@pytest.mark.parametrize("where", ["filter above OPTIONAL", "HAVING"])
def test_a_catastrophic_regex_in_the_gateway_answers_at_once(module_service: Service, pattern: str, where: str) -> None:
    if where == "HAVING":
        query = (
            f'SELECT ?x (COUNT(*) AS ?n) WHERE {{ BIND("{ALMOST}" AS ?x) }} GROUP BY ?x HAVING(REGEX(?x, "{pattern}"))'
        )
    else:
        query = (
            f'SELECT ?x WHERE {{ {{ BIND("{ALMOST}" AS ?x) OPTIONAL {{ ?x {LIKES} ?o }} }} '
            f'FILTER(REGEX(?x, "{pattern}")) }}'
        )
    response, took = attack(module_service, "sparql", query)
    assert bindings(response) == []
    assert took < 5


@pytest.mark.parametrize("route", ["v1", "sparql"])
def test_regex_and_replace_keep_their_semantics(module_service: Service, route: str) -> None:
    """Flags, groups and XPath's own classes, on both engines (the worker's and the gateway's)."""
    optional = f"OPTIONAL {{ ?t {LIKES} ?o }}" if route == "sparql" else ""
    query = (
        'SELECT ?i ?m ?q ?w ?r WHERE { BIND("Hello\\nWorld" AS ?t) '
        + optional
        + ' BIND(REGEX(?t, "^world$", "mi") AS ?m) BIND(REGEX("a.c", "a.c", "q") && !REGEX("abc", "a.c", "q") AS ?q)'
        ' BIND(REGEX(?t, "o.W") AS ?i) BIND(REGEX("+", "^\\\\w$") AS ?w) BIND(REPLACE(?t, "(l+)(o)", "[$2$1]") AS ?r) }'
    )
    (row,) = bindings(run(module_service, route, query))
    values = {name: cell["value"] for name, cell in row.items()}  # type: ignore[index]
    assert values == {"m": "true", "q": "true", "i": "false", "w": "true", "r": "He[oll]\nWorld"}


def doubling(name: str, start: str, times: int, step: str = "CONCAT(?{v}, ?{v})") -> str:
    """BIND(start AS ?name0) then `times` BINDs, each of the one before."""
    binds = [f"BIND({start} AS ?{name}0)"]
    binds += [f"BIND({step.format(v=f'{name}{i}')} AS ?{name}{i + 1})" for i in range(times)]
    return " ".join(binds)


BUILDERS = {
    # the finding: an 808-character query doubling a string 24 times
    "CONCAT": (doubling("x", '"a"', 24), "?x24", "CONCAT builds a string of more than"),
    "REPLACE": (
        doubling("x", '"a"', 12) + f' BIND(REPLACE(?x12, "(a)", "{"$1" * 300}") AS ?y)',
        "?y",
        "REPLACE builds a string of more than",
    ),
    "ENCODE_FOR_URI": (doubling("x", '"é"', 18) + " BIND(ENCODE_FOR_URI(?x18) AS ?y)", "?y", "ENCODE_FOR_URI builds"),
    "integer product": (doubling("i", "2", 16, "?{v} * ?{v}"), "?i16", "an integer of more than"),
}


@pytest.mark.parametrize("route", ["v1", "sparql"])
@pytest.mark.parametrize("builder", list(BUILDERS))
def test_a_value_built_past_its_limit_is_a_422(module_service: Service, route: str, builder: str) -> None:
    binds, variable, message = BUILDERS[builder]
    if route == "sparql":  # the BINDs after an OPTIONAL: the gateway's smart client evaluates them
        first, rest = binds.split(") ", 1)
        binds = f"{first}) OPTIONAL {{ ?x0 {LIKES} ?o }} {rest}"
    response, took = attack(module_service, route, f"SELECT ({variable} AS ?v) WHERE {{ {binds} }}")
    assert response.status_code == 422, response.text[:300]
    problem = response.json()
    assert problem["type"] == "https://quanta.dev/problems/expression-limit"
    assert message in problem["detail"]
    if "string" in message:
        assert "QUANTA_MAX_LITERAL_CHARS" in problem["detail"]
    assert took < 10


def test_a_page_of_many_long_computed_terms_is_refused(module_service: Service) -> None:
    """Each term within its limit, but 350 columns of 786,432 characters: one row would be 275 MB
    of results, past the native writers' 256 MiB of computed terms a page (422). Its 350
    projected expressions nest 350 operators, past what a saved plan holds: refused before any
    result (400), and the worker never builds the row."""
    big = doubling("x", '"a"', 6, "CONCAT(?{v}, ?{v}, ?{v}, ?{v}, ?{v}, ?{v}, ?{v}, ?{v})")  # 8^6 = 262,144
    big += " BIND(CONCAT(?x6, ?x6, ?x6) AS ?x7)"
    columns = " ".join(f"(?x7 AS ?y{j})" for j in range(350))
    query = f"SELECT {columns} WHERE {{ ?s {LIKES} ?o {big} }}"
    response, _ = attack(module_service, "v1", query, max_rss_mb=600)
    assert response.status_code == 400, response.text[:300]
    problem = response.json()
    assert problem["type"] == "https://quanta.dev/problems/query-too-complex"
    assert "saved plan" in problem["detail"]


def test_group_concat_past_the_limit_is_a_422(module_service: Service) -> None:
    """GROUP_CONCAT (the smart client's) builds a literal like any function: 4,100 characters
    a row, joined over the dataset's likes, passes a million after about 250 rows."""
    binds = doubling("x", '"a"', 12)
    query = f"SELECT (GROUP_CONCAT(?v) AS ?all) WHERE {{ ?s {LIKES} ?o {binds} BIND(CONCAT(STR(?s), ?x12) AS ?v) }}"
    response, _ = attack(module_service, "sparql", query)
    assert response.status_code == 422, response.text[:300]
    assert "GROUP_CONCAT builds a string of more than" in response.json()["detail"]
