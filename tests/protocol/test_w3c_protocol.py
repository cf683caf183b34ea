"""The W3C SPARQL 1.1 Protocol tests (`sparql11/protocol/manifest.ttl`) against
a running gateway: each test's HTTP requests, sent as written (their
`/sparql/` path pointed at the `protocol` dataset), and the answers checked
for status, format and boolean.

The update tests that expect success are skipped: the service is read-only
(no SPARQL Update). The `bad_update_*` tests run: an update is refused with a
4xx, as they expect.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph as ox
import pytest
from rdflib import Graph, Namespace
from rdflib.collection import Collection

from quanta.testkit.data import shared_dir

ROOT = Path(os.environ.get("QUANTA_W3C_TESTS", shared_dir() / "conformance" / "w3c-rdf-tests")) / "sparql"
MANIFEST = ROOT / "sparql11" / "protocol" / "manifest.ttl"
MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
HT = Namespace("http://www.w3.org/2011/http#")
CNT = Namespace("http://www.w3.org/2011/content#")
HTS = "http://www.w3.org/2011/http-statusCodes#StatusCode"
READ_ONLY = "SPARQL Update: the service is read-only"


@dataclass(frozen=True)
class Exchange:
    """One request of a test and what its response must be."""

    method: str
    path: str
    headers: dict[str, str]
    body: str | None
    statuses: frozenset[str]  # status classes allowed: "2xx", "3xx", "4xx"...
    boolean: bool | None
    format: str | None  # "boolean", "tabular" or "RDF"


@dataclass(frozen=True)
class ProtocolTest:
    name: str
    exchanges: tuple[Exchange, ...]


def load() -> list[ProtocolTest]:
    graph = Graph().parse(MANIFEST, format="turtle", publicID=MANIFEST.as_uri())
    manifest = next(graph.subjects(predicate=MF.entries))
    tests = []
    for entry in _list(graph, manifest, MF.entries):
        action = graph.value(entry, MF.action)
        exchanges = tuple(_exchange(graph, r) for r in _list(graph, action, HT.requests))
        tests.append(ProtocolTest(str(entry).rsplit("#", 1)[-1], exchanges))
    return tests


def _list(graph: Graph, subject: Any, predicate: Any) -> list[Any]:
    """The RDF list `subject` `predicate` names (none: empty)."""
    head = graph.value(subject, predicate)
    return list(Collection(graph, head)) if head is not None else []


def _exchange(graph: Graph, request: Any) -> Exchange:
    headers = {}
    for header in _list(graph, request, HT.headers):
        headers[str(graph.value(header, HT.fieldName))] = str(graph.value(header, HT.fieldValue))
    body = graph.value(request, HT.body)
    response = graph.value(request, HT.resp)
    boolean = graph.value(response, MF.expectedBoolean)
    fmt = graph.value(response, MF.expectedFormat)
    return Exchange(
        method=str(graph.value(request, HT.methodName)),
        path=str(graph.value(request, HT.absolutePath)),
        headers=headers,
        body=str(graph.value(body, CNT.chars)) if body is not None else None,
        statuses=frozenset(str(s).removeprefix(HTS) for s in graph.objects(response, MF.expectedStatus)),
        boolean=bool(boolean.toPython()) if boolean is not None else None,
        format=str(fmt) if fmt is not None else None,
    )


TESTS = load() if MANIFEST.exists() else []


def _marks(test: ProtocolTest) -> list[pytest.MarkDecorator]:
    if test.name.startswith("update_"):
        return [pytest.mark.skip(reason=READ_ONLY)]
    return []


def _params() -> list[object]:
    return [pytest.param(t, id=t.name, marks=_marks(t)) for t in TESTS]


@pytest.mark.parametrize("test", _params())
def test_protocol(test: ProtocolTest, running: Any) -> None:
    with httpx.Client(base_url=running.url, timeout=60) as client:
        for exchange in test.exchanges:
            path = exchange.path.replace("/sparql/", "/sparql/protocol", 1)
            response = client.request(
                exchange.method, path, headers=exchange.headers,
                content=exchange.body.encode() if exchange.body is not None else None,
            )  # fmt: skip
            assert f"{response.status_code // 100}xx" in exchange.statuses, (response.status_code, response.text)
            if exchange.format is not None:
                _check_format(response, exchange.format, exchange.boolean)


def _check_format(response: httpx.Response, expected: str, boolean: bool | None) -> None:
    media_type = response.headers["content-type"].split(";")[0]
    if expected == "RDF":
        ox.parse(response.content, format=ox.RdfFormat.from_media_type(media_type))
        return
    parsed = ox.parse_query_results(response.content, format=ox.QueryResultsFormat.from_media_type(media_type))
    if expected == "boolean":
        assert isinstance(parsed, ox.QueryBoolean), "expected a boolean answer"
        if boolean is not None:
            assert bool(parsed) is boolean
    else:
        assert isinstance(parsed, ox.QuerySolutions), "expected a table of solutions"


def test_the_manifest_was_read() -> None:
    assert len(TESTS) == 34 and sum(t.name.startswith("update_") for t in TESTS) == 7
