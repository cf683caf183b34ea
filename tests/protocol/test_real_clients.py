"""Real SPARQL clients, unchanged, against the running endpoint: SPARQLWrapper,
rdflib's SPARQLStore, and Apache Jena's `rsparql` (Java, from Maven Central
through scripts/jena.sh). Their answers are checked against pyoxigraph's
over the same triples."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest
from rdflib import Graph, Literal, URIRef
from rdflib.plugins.stores.sparqlstore import SPARQLStore
from rdflib.query import Result, ResultRow
from SPARQLWrapper import CSV, JSON, POST, XML, SPARQLWrapper

from quanta.testkit.oracle import oxigraph_answer, oxigraph_rows, oxigraph_solutions

REPO = Path(__file__).resolve().parents[2]
WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"
# A join spanning many quanta (5 ms, pages of 100 rows), with a FILTER.
SELECT = f"""PREFIX wsdbm: <{WSDBM}>
SELECT ?user ?product ?friend WHERE {{
  ?user wsdbm:likes ?product . ?user wsdbm:friendOf ?friend .
  FILTER(?product != wsdbm:Product0)
}}"""
ASK = f"ASK {{ <{WSDBM}User0> <{WSDBM}follows> ?x }}"


def from_json(bindings: list[dict[str, dict[str, str]]]) -> Counter[tuple[tuple[str, str], ...]]:
    """SPARQL JSON bindings of IRIs, as oxigraph_rows writes solutions."""
    return Counter(tuple(sorted((v, f"<{t['value']}>") for v, t in b.items())) for b in bindings)


# -- SPARQLWrapper --


def test_sparqlwrapper_json_by_get_and_post(running: Any, watdiv: ox.Store) -> None:
    for method in ("GET", POST):
        client = SPARQLWrapper(running.endpoint())
        client.setQuery(SELECT)
        client.setReturnFormat(JSON)
        if method == POST:
            client.setMethod(POST)
        result: Any = client.query().convert()
        assert from_json(result["results"]["bindings"]) == oxigraph_solutions(watdiv, SELECT), method


def test_sparqlwrapper_xml_csv_and_ask(running: Any, watdiv: ox.Store) -> None:
    client = SPARQLWrapper(running.endpoint())  # XML: its default format
    client.setQuery(SELECT)
    document: Any = client.query().convert()
    assert len(document.getElementsByTagName("result")) == sum(oxigraph_solutions(watdiv, SELECT).values())
    client.setReturnFormat(CSV)
    table: Any = client.query().convert()
    assert table.decode().splitlines()[0] == "user,product,friend"
    client.setQuery(ASK)
    for fmt in (JSON, XML):
        client.setReturnFormat(fmt)
        answer: Any = client.query().convert()
        value = answer["boolean"] if fmt == JSON else answer.getElementsByTagName("boolean")[0].firstChild.data
        assert str(value).lower() == str(oxigraph_rows(watdiv, ASK)).lower()


def test_sparqlwrapper_sees_errors(running: Any) -> None:
    from SPARQLWrapper.SPARQLExceptions import QueryBadFormed

    client = SPARQLWrapper(running.endpoint())
    client.setQuery("SELECT * WHERE { ?s ?p }")
    with pytest.raises(QueryBadFormed):
        client.query()


# -- rdflib's SPARQLStore --


def test_rdflib_sparqlstore(running: Any, watdiv: ox.Store) -> None:
    graph = Graph(SPARQLStore(query_endpoint=running.endpoint()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdflib warns that the store is read-only
        rows = solutions(graph.query(SELECT))
    got = Counter(tuple(sorted((name, f"<{row[name]}>") for name in ("user", "product", "friend"))) for row in rows)
    assert got == oxigraph_solutions(watdiv, SELECT)
    assert all(isinstance(row[0], URIRef) for row in rows)
    assert graph.query(ASK).askAnswer is oxigraph_rows(watdiv, ASK)
    typed = solutions(graph.query(f"SELECT ?p WHERE {{ <{WSDBM}Product0> <http://purl.org/goodrelations/price> ?p }}"))
    assert all(isinstance(row[0], Literal) for row in typed)


def solutions(result: Result) -> list[ResultRow]:
    """A SELECT's rows (rdflib's results also iterate over triples or a boolean)."""
    rows = []
    for row in result:
        assert isinstance(row, ResultRow)
        rows.append(row)
    return rows


# -- Apache Jena (outside Python) --


@pytest.fixture(scope="module")
def jena() -> str:
    if shutil.which("java") is None:
        pytest.skip("java is not installed")
    return subprocess.run([REPO / "scripts" / "jena.sh"], check=True, capture_output=True, text=True).stdout.strip()


def test_jena_rsparql(running: Any, watdiv: ox.Store, jena: str, tmp_path: Path) -> None:
    query = tmp_path / "query.rq"
    query.write_text(SELECT)
    for fmt, media_type in (("TSV", "text/tab-separated-values"), ("XML", "application/sparql-results+xml")):
        out = subprocess.run(
            ["java", "-cp", jena, "arq.rsparql", "--service", running.endpoint(), "--query", str(query),
             f"--results={fmt}"],
            check=True, capture_output=True, timeout=120,
        ).stdout  # fmt: skip
        parsed = ox.parse_query_results(out, format=ox.QueryResultsFormat.from_media_type(media_type))
        assert oxigraph_answer(parsed) == oxigraph_solutions(watdiv, SELECT), fmt
