"""An answer made of huge computed literals (legitimate: each within QUANTA_MAX_LITERAL_CHARS)
costs the gateway a few megabytes at a time, not the answer's size, and holds no other request:

- pages are bounded in bytes from their first row (a worker's page of 512 Ki-character rows
  is one or two rows, not the 16 it took before measuring);
- the smart client's batches are bounded in bytes as well as rows (a BIND hands its rows on
  once it has built `Budgets.batch_bytes` characters), the gateway writes and sends them by
  the megabyte, and decodes a page a slice at a time, handing its event loop back;
- the results writers do not keep huge terms in their caches.

Real services (redis-server, two workers, the gateway over HTTP). Measured on the 2-core
machine: 1,099 rows of 512 Ki characters (576 MB of CSV) through /sparql, the BINDs above an
OPTIONAL: before, the gateway went from 83 MB at rest to a peak of 1,252 MB, a small /sparql
query waited up to 1.67 s and /healthz 1.35 s; after, a peak of 106 MB, 0.22 s and 0.03 s.
The literals built by the workers instead: before, gateway 600 MB and workers 390 MB; after,
97 and 210 MB. The test reads the first half of that answer (550 rows, 288 MB of CSV): more than
the gateway's bound above its memory at rest, in half the time.
"""

from __future__ import annotations

import time
from collections import Counter

import httpx
import pyoxigraph as ox
import pytest

from quanta.testkit.data import shared_dir
from quanta.testkit.oracle import oxigraph_rows, oxigraph_store

from .conftest import Service, bystander
from .test_hardening_expressions import peak_rss

SERVICE_OPTIONS = {"quantum_ms": 75, "QUANTA_SPARQL_QUERY_RATE": "0", "QUANTA_RATE_LIMIT": "0"}
LIKES = "<http://db.uwaterloo.ca/~galuc/wsdbm/likes>"
DOUBLINGS = 19
SUFFIX = "a" * 2**DOUBLINGS  # 524,288 characters, half of QUANTA_MAX_LITERAL_CHARS
BINDS = 'BIND("a" AS ?x0) ' + " ".join(f"BIND(CONCAT(?x{i}, ?x{i}) AS ?x{i + 1})" for i in range(DOUBLINGS))
BIG = f"BIND(CONCAT(STR(?s), ?x{DOUBLINGS}) AS ?y)"
GATEWAY_MAX_MB = 200  # 84 at rest, about 106 at peak; 1,252 before
# Workers: 65 MB at rest, about 210 at peak (what glibc keeps of what was freed: malloc_trim
# gives back all but 65 MB); 390 before, building pages of 16 rows of a megabyte.
WORKER_MAX_MB = 300
STALL_BOUND_S = 1.0
ROWS = 550  # of the pattern's 1,099

# Where each literal is built: by the smart client in the gateway (the BINDs above the
# OPTIONAL), or by the workers (below it), the gateway then joining rows of huge terms.
QUERIES = {
    "client-side": f"SELECT ?y WHERE {{ ?s {LIKES} ?o OPTIONAL {{ ?o {LIKES} ?z }} {BINDS} {BIG} }} LIMIT {ROWS}",
    "worker-side": f"SELECT ?y WHERE {{ {{ ?s {LIKES} ?o {BINDS} {BIG} }} OPTIONAL {{ ?o {LIKES} ?z }} }} LIMIT {ROWS}",
}
# The subjects the answer's rows start with: one row per row of this (without the LIMIT).
SUBJECTS = f"SELECT ?s WHERE {{ ?s {LIKES} ?o OPTIONAL {{ ?o {LIKES} ?z }} }}"


@pytest.fixture(scope="module")
def subjects() -> Counter[str]:
    """pyoxigraph's answer: each subject IRI, as often as it has rows."""
    source = shared_dir() / "datasets" / "watdiv" / "watdiv-100k.nt.gz"
    if not source.exists():
        pytest.skip(f"shared WatDiv data not found at {source}")
    reference: ox.Store = oxigraph_store(source)
    rows = oxigraph_rows(reference, SUBJECTS)
    assert not isinstance(rows, bool)
    counted: Counter[str] = Counter()
    for solution, n in rows.items():
        (value,) = [v for name, v in solution if name == "s"]
        counted[value.strip("<>")] += n
    assert counted.total() > 1000
    return counted


@pytest.mark.parametrize("where", list(QUERIES))
def test_an_answer_of_huge_literals_costs_the_gateway_megabytes_and_holds_no_one(
    module_service: Service, subjects: Counter[str], where: str
) -> None:
    got: Counter[str] = Counter()
    with (
        peak_rss(module_service) as peak,
        bystander(module_service.url) as small,
        bystander(module_service.url, path="/healthz", every_s=0.05) as health,
    ):
        time.sleep(0.3)
        form = {"query": QUERIES[where]}
        with (
            httpx.Client(base_url=module_service.url, timeout=300) as http,
            http.stream("POST", "/sparql", data=form, headers={"Accept": "text/csv"}) as response,
        ):
            assert response.status_code == 200, response.read()[:300]
            lines = response.iter_lines()
            assert next(lines) == "y"
            for line in lines:
                assert line.endswith(SUFFIX) and len(line) > len(SUFFIX), line[:100]
                got[line[: -len(SUFFIX)]] += 1
        time.sleep(0.3)
    assert got.total() == ROWS and got <= subjects, "rows of the pattern, each the subject and 2^19 a's"
    assert not small.failures and not health.failures, (small.failures[:3], health.failures[:3])
    assert small.worst < STALL_BOUND_S, f"a small /sparql query waited {small.worst:.2f} s"
    assert health.worst < STALL_BOUND_S, f"/healthz waited {health.worst:.2f} s"
    assert peak["gateway"] < GATEWAY_MAX_MB, peak
    assert max(peak["worker0"], peak["worker1"]) < WORKER_MAX_MB, peak


def test_a_page_of_huge_rows_is_bounded_in_bytes_from_its_first_row(module_service: Service) -> None:
    """/v1: rows of about 512 KiB of JSON, pages of about max_page_bytes (1 MiB): one or two rows
    a page (it was sixteen, the rows taken before the first measure, capped here by the LIMIT at 6);
    the pages, each resumed from the last, are the whole answer."""
    query = f"SELECT ?s ?y WHERE {{ ?s {LIKES} ?o {BINDS} {BIG} }} LIMIT 6"
    counts: list[int] = []
    body: dict[str, str] = {"query": query}
    with httpx.Client(base_url=module_service.url, timeout=60) as http:
        while True:
            response = http.post("/v1/datasets/watdiv/query", json=body)
            assert response.status_code == 200, response.text[:300]
            page = response.json()
            bindings = page["results"]["bindings"]
            counts.append(len(bindings))
            for b in bindings:
                assert b["y"]["value"] == b["s"]["value"] + SUFFIX
            if page["next"] is None:
                break
            body = {"next": page["next"]}
    assert sum(counts) == 6, counts
    assert max(counts) <= 2, f"rows per page: {counts}"
