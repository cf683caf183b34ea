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

import csv
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pyoxigraph
import pytest
from rdflib import Graph
from rdflib.compare import isomorphic

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make the helpers importable

from manifest import (
    Case,
    Results,
    Solution,
    by_value,
    csv_cell,
    describe,
    from_oxigraph,
    load_cases,
    read_results,
    same_solutions,
    to_ntriples,
)
from skips import ENDPOINT_SKIPS, SERVICE_SKIP, SKIPS, VALUE_COMPARED

from quanta.common.local import RedisServer, free_port, wait_ready
from quanta.engine.storage import open_store
from quanta.engine.testing import shared_dir, write_hdt

ROOT = Path(os.environ.get("QUANTA_W3C_TESTS", shared_dir() / "conformance" / "w3c-rdf-tests")) / "sparql"
MANIFESTS = [
    "sparql10/manifest-evaluation.ttl",
    "sparql10/extended-manifest-evaluation.ttl",
    "sparql11/manifest-sparql11-query.ttl",
    "sparql11/manifest-sparql11-results.ttl",
    "sparql11/manifest-sparql11-fed.ttl",
]
COMMAND = [sys.executable, "-m", "quanta.cli.main"]
QUANTUM_MS = 1
PAGE_RESULTS = 2  # rows a page at most: every answer of more than 2 rows spans several quanta
RESULT_MEDIA = {
    ".srx": "application/sparql-results+xml",
    ".srj": "application/sparql-results+json",
    ".tsv": "text/tab-separated-values",
    ".csv": "text/csv",
}
GRAPH_MEDIA = {".ttl": "text/turtle", ".nt": "application/n-triples", ".rdf": "application/rdf+xml"}
RS = "http://www.w3.org/2001/sw/DataAccess/tests/result-set#"

CASES: list[Case] = load_cases(ROOT, MANIFESTS) if ROOT.exists() else []


def query_text(case: Case) -> str:
    """The query, with its own location as base IRI (as the manifests assume)."""
    return f"BASE <{case.query.as_uri()}>\n{case.query.read_text(encoding='utf-8')}"


def _params() -> list[object]:
    params: list[object] = []
    for case in CASES:
        reason = SKIPS.get(case.id) or ENDPOINT_SKIPS.get(case.id) or (SERVICE_SKIP if case.service_data else None)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


@dataclass
class Service:
    client: httpx.Client
    datasets: dict[tuple[tuple[Path, ...], tuple[Path, ...]], str]


def graph_files(case: Case) -> tuple[Path, ...]:
    """The test's named graphs: its qt:graphData, and the local files its FROM / FROM NAMED name
    (the manifests expect them loaded from their IRIs, relative to the query's location)."""
    code = re.sub(r'"(?:[^"\\]|\\.)*"|#[^\n]*', " ", case.query.read_text(encoding="utf-8"))
    named = {urljoin(case.query.as_uri(), iri) for iri in re.findall(r"FROM\s+(?:NAMED\s+)?<([^>]*)>", code, re.I)}
    local = [Path(iri.removeprefix("file://")) for iri in named if iri.startswith("file://")]
    return tuple(sorted({*case.graph_data, *(f for f in local if f.is_file())}))


def _catalog(folder: Path) -> tuple[Path, dict[tuple[tuple[Path, ...], tuple[Path, ...]], str]]:
    """One dataset per set of data files (an empty default graph for none) and of named
    graphs (each file's own IRI names it), as HDT."""
    names: dict[tuple[tuple[Path, ...], tuple[Path, ...]], str] = {}
    graph_hdt: dict[Path, Path] = {}
    lines = []
    for case in CASES:
        key = (case.data, graph_files(case))
        if key in names:
            continue
        name = names[key] = f"d{len(names)}"
        data = b"".join(to_ntriples(f, blank_prefix=f"f{i}x") for i, f in enumerate(case.data))
        path = write_hdt(data, folder, name)
        open_store(str(path), name)  # its side index, built once before the workers start
        lines += [f"[datasets.{name}]", f'path = "{path.name}"', f"quantum_ms = {QUANTUM_MS}",
                  f"max_results = {PAGE_RESULTS}", ""]  # fmt: skip
        if key[1]:
            lines.append(f"[datasets.{name}.graphs]")
        for file in key[1]:
            if file not in graph_hdt:
                graph_hdt[file] = write_hdt(
                    to_ntriples(file, blank_prefix=f"g{len(graph_hdt)}x"), folder, f"g{len(graph_hdt)}"
                )
                open_store(str(graph_hdt[file]))
            lines.append(f'"{file.as_uri()}" = "{graph_hdt[file].name}"')
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
        got = Graph().parse(data=response.content, format=_rdflib_format(accept))
        assert isomorphic(got, expected), f"graphs differ\nexpected:\n{_nt(expected)}\ngot:\n{_nt(got)}"
    else:
        check(expected, response.content, accept, value_compared=case.id in VALUE_COMPARED)


def _expected(path: Path) -> Results | Graph:
    """A result set, or (CONSTRUCT, DESCRIBE) the expected graph."""
    if path.suffix in (".ttl", ".rdf", ".nt"):
        graph = Graph().parse(path, format=_rdflib_format(GRAPH_MEDIA[path.suffix]), publicID=path.as_uri())
        if not any(str(o) == RS + "ResultSet" for o in graph.objects()):
            return graph
    return read_results(path)


def _accept(path: Path, expected: Results | Graph) -> str:
    if isinstance(expected, Graph):
        return GRAPH_MEDIA[path.suffix]
    return RESULT_MEDIA.get(path.suffix, "application/sparql-results+json")


def _rdflib_format(media_type: str) -> str:
    return {"text/turtle": "turtle", "application/n-triples": "nt", "application/rdf+xml": "xml"}[media_type]


def _nt(graph: Graph) -> str:
    return "\n".join(sorted(line for line in graph.serialize(format="nt").splitlines() if line))


def check(expected: Results, body: bytes, media_type: str, value_compared: bool = False) -> None:
    got = _read_csv(body) if media_type == "text/csv" else _read(body, media_type)
    if expected.boolean is not None:
        assert got.boolean == expected.boolean, "expected an ASK answer of " + str(expected.boolean)
        return
    assert got.solutions is not None and got.variables is not None, "expected SELECT results"
    assert expected.variables is not None and expected.solutions is not None
    assert sorted(got.variables) == sorted(expected.variables), "projected variables differ"
    wanted, solutions = expected.solutions, got.solutions
    if expected.lossy_csv and not got.lossy_csv:
        solutions = [{v: csv_cell(t) for v, t in s.items()} for s in solutions]
    if value_compared:
        wanted = [{v: by_value(t) for v, t in s.items()} for s in wanted]
        solutions = [{v: by_value(t) for v, t in s.items()} for s in solutions]
    assert same_solutions(wanted, solutions), (
        f"solutions differ\nexpected {len(wanted)}:\n{describe(wanted)}\ngot {len(solutions)}:\n{describe(solutions)}"
    )


def _read(body: bytes, media_type: str) -> Results:
    parsed = pyoxigraph.parse_query_results(body, format=pyoxigraph.QueryResultsFormat.from_media_type(media_type))
    if isinstance(parsed, pyoxigraph.QueryBoolean):
        return Results(boolean=bool(parsed))
    variables = [v.value for v in parsed.variables]
    solutions: list[Solution] = [
        {v: from_oxigraph(s[v]) for v in variables if s[v] is not None}
        for s in parsed  # type: ignore[union-attr]
    ]
    return Results(variables, solutions)


def _read_csv(body: bytes) -> Results:
    """CSV as the suite's expected .csv files are read (manifest._read_csv): cells as text."""
    rows = list(csv.reader(io.StringIO(body.decode("utf-8"), newline="")))
    variables, cells = rows[0], rows[1:]
    solutions: list[Solution] = [
        {v: ("bnode", c[2:]) if c.startswith("_:") else ("text", c) for v, c in zip(variables, row, strict=True) if c}
        for row in cells
    ]
    return Results(variables, solutions, lossy_csv=True)


def test_suites_found() -> None:
    """Without this, a missing suite would collect no test at all and pass."""
    assert len(CASES) >= 520, f"expected the W3C query-evaluation tests under {ROOT}, found {len(CASES)}"
