"""The W3C SPARQL 1.0 and 1.1 query-evaluation tests through the SPARQL
endpoint: HTTP `POST /sparql/{dataset}` of a real gateway, with real workers
and Redis, over a catalog of every test's data (one dataset per set of data
files), at a quantum so small that most queries span several quanta.

Every query is answered, whatever it uses (the smart client in the gateway
runs what the server fragment does not). Each test asks for its results in
the format of its expected results, so the endpoint's writers are checked
too: SPARQL XML for `.srx`, JSON for `.srj`, TSV for `.tsv`, CSV for `.csv`
(the result-format suites), JSON for result sets written in RDF; Turtle or
RDF/XML for CONSTRUCT and DESCRIBE graphs. Left out, each with a reason:
skips.ENDPOINT_SKIPS (and, while the smart client is being built, a query
it refuses as unsupported is an xfail naming the operator).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from rdflib import Graph

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make the helpers importable

from harness import (
    CASES,
    EXPECTED_CASES,
    GRAPH_FORMATS,
    ROOT,
    Files,
    check_graph,
    check_solutions,
    graph_files,
    query_text,
    read_graph,
)
from manifest import RESULT_MEDIA, Case, Results, parse_results, read_results
from skips import ENDPOINT_SKIPS, SERVICE_SKIP, SKIPS, VALUE_COMPARED

from quanta.common.redis_server import RedisServer, free_port, wait_ready
from quanta.engine.storage import open_store

COMMAND = [sys.executable, "-m", "quanta.cli.main"]
QUANTUM_MS = 1
PAGE_RESULTS = 2  # rows a page at most: every answer of more than 2 rows spans several quanta
GRAPH_MEDIA = {".ttl": "text/turtle", ".nt": "application/n-triples", ".rdf": "application/rdf+xml"}
RS = "http://www.w3.org/2001/sw/DataAccess/tests/result-set#"


def _params() -> list[object]:
    params: list[object] = []
    for case in CASES:
        reason = SKIPS.get(case.id) or ENDPOINT_SKIPS.get(case.id) or (SERVICE_SKIP if case.service_data else None)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


Dataset = tuple[tuple[Path, ...], tuple[Path, ...]]  # the default graph's data files, the named graphs' files


@dataclass
class Service:
    client: httpx.Client
    datasets: dict[Dataset, str]


def _catalog(folder: Path) -> tuple[Path, dict[Dataset, str]]:
    """One dataset per set of data files (an empty default graph for none) and of named
    graphs (each file's own IRI names it), as HDT files with their side index (built once,
    before the workers start)."""
    files = Files(folder, open_store)
    names: dict[Dataset, str] = {}
    lines = []
    for case in CASES:
        key = (case.data, graph_files(case))
        if key in names:
            continue
        name = names[key] = f"q{len(names)}"
        files.store(case.data)
        lines += [f"[datasets.{name}]", f'path = "{files.path(case.data).name}"', f"quantum_ms = {QUANTUM_MS}",
                  f"max_results = {PAGE_RESULTS}", ""]  # fmt: skip
        if key[1]:
            lines.append(f"[datasets.{name}.graphs]")
        for file in key[1]:
            files.store((file,))
            lines.append(f'"{file.as_uri()}" = "{files.path((file,)).name}"')
        lines.append("")
    catalog = folder / "catalog.toml"
    catalog.write_text("\n".join(lines))
    return catalog, names


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for the whole suite: Redis, two workers, a gateway."""
    folder = tmp_path_factory.mktemp("w3c-endpoint")
    catalog, names = _catalog(folder)
    redis = RedisServer().start()
    port = free_port()
    env = {
        **os.environ, "QUANTA_REDIS_URL": redis.url, "QUANTA_CATALOG": str(catalog), "QUANTA_ACCESS_LOG": "0",
        "QUANTA_SECRET_KEYS": "w3c:0123456789abcdef0123456789abcdef", "QUANTA_RATE_LIMIT": "0",
        "QUANTA_SPARQL_QUERY_RATE": "0", "QUANTA_SPARQL_MAX_QUERIES": "0",
    }  # fmt: skip
    log = (folder / "service.log").open("wb")
    processes = [subprocess.Popen([*COMMAND, "worker", "--name", f"w3c-{i}"], env=env, stderr=log) for i in range(2)]
    processes.append(subprocess.Popen([*COMMAND, "gateway", "--port", str(port)], env=env, stderr=log))
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_ready(url, processes[-1]), f"the service did not start: see {folder / 'service.log'}"
        with httpx.Client(base_url=url, timeout=120) as client:
            yield Service(client, names)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=20)
        redis.stop()
        log.close()


@pytest.mark.slow
@pytest.mark.parametrize("case", _params())
def test_endpoint(case: Case, service: Service) -> None:
    assert case.result is not None
    expected = _expected(case.result)
    accept = _accept(case.result, expected)
    response = service.client.post(
        f"/sparql/{service.datasets[case.data, graph_files(case)]}",
        data={"query": query_text(case)},
        headers={"accept": accept},
    )
    if response.status_code == 422 and response.json().get("type", "").endswith("/unsupported-operator"):
        pytest.xfail(f"the smart client does not run {response.json().get('operator')} yet")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == accept
    if isinstance(expected, Graph):
        check_graph(expected, Graph().parse(data=response.content, format=GRAPH_FORMATS[case.result.suffix]))
    else:
        check(expected, parse_results(response.content, accept), value_compared=case.id in VALUE_COMPARED)


def _expected(path: Path) -> Results | Graph:
    """A result set, or (CONSTRUCT, DESCRIBE) the expected graph."""
    if path.suffix in GRAPH_FORMATS:
        graph = read_graph(path)
        if not any(str(o) == RS + "ResultSet" for o in graph.objects()):
            return graph
    return read_results(path)


def _accept(path: Path, expected: Results | Graph) -> str:
    if isinstance(expected, Graph):
        return GRAPH_MEDIA[path.suffix]
    return RESULT_MEDIA.get(path.suffix, "application/sparql-results+json")


def check(expected: Results, got: Results, value_compared: bool = False) -> None:
    if expected.boolean is not None:
        assert got.boolean == expected.boolean, "expected an ASK answer of " + str(expected.boolean)
        return
    assert got.solutions is not None and got.variables is not None, "expected SELECT results"
    check_solutions(expected, got.variables, got.solutions, lossy_csv=got.lossy_csv, value_compared=value_compared)


def test_suites_found() -> None:
    """Without this, a missing suite would collect no test at all and pass."""
    assert len(CASES) >= EXPECTED_CASES, f"expected the W3C query-evaluation tests under {ROOT}, found {len(CASES)}"
