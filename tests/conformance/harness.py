"""What every run of the W3C query-evaluation suites shares, whatever runs the
queries (the engine in-process, the smart client, the HTTP endpoint): the
cases, the test data as HDT files (a test's dataset: its default graph and
named graphs), the query text, and the comparison of answers with the
expected results (solutions as multisets, booleans, graphs up to isomorphism).

Rows are tuples of terms in quanta's dictionary syntax (raw lexical forms in
quotes), as the client and the engine give them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin

import rdflib
from manifest import (
    Case,
    Results,
    Solution,
    by_value,
    csv_cell,
    describe,
    from_dictionary,
    load_cases,
    same_solutions,
    to_ntriples,
)
from rdflib.compare import isomorphic

from quanta.engine.storage import TripleStore
from quanta.sparql.terms import split_literal
from quanta.testkit.data import shared_dir, write_hdt

ROOT = Path(os.environ.get("QUANTA_W3C_TESTS", shared_dir() / "conformance" / "w3c-rdf-tests")) / "sparql"
MANIFESTS = [
    "sparql10/manifest-evaluation.ttl",
    "sparql10/extended-manifest-evaluation.ttl",
    "sparql11/manifest-sparql11-query.ttl",
    "sparql11/manifest-sparql11-results.ttl",
    "sparql11/manifest-sparql11-fed.ttl",
]
CASES: list[Case] = load_cases(ROOT, MANIFESTS) if ROOT.exists() else []
EXPECTED_CASES = 520  # at least: each suite's test_suites_found fails below it (a missing suite collects nothing)


def query_text(case: Case) -> str:
    """The query, with its own location as base IRI (as the manifests assume)."""
    return f"BASE <{case.query.as_uri()}>\n{case.query.read_text(encoding='utf-8')}"


def graph_files(case: Case) -> tuple[Path, ...]:
    """The test's named graphs: its qt:graphData, and the local files its FROM / FROM NAMED name
    (the manifests expect them loaded from their IRIs, relative to the query's location). Read
    from the text, not parsed: rdflib's parser never returns on some queries (see skips.SKIPS)."""
    code = re.sub(r'"(?:[^"\\]|\\.)*"|#[^\n]*', " ", case.query.read_text(encoding="utf-8"))
    named = {urljoin(case.query.as_uri(), iri) for iri in re.findall(r"FROM\s+(?:NAMED\s+)?<([^>]*)>", code, re.I)}
    local = [Path(iri.removeprefix("file://")) for iri in named if iri.startswith("file://")]
    return tuple(sorted({*case.graph_data, *(f for f in local if f.is_file())}))


class Files:
    """HDT files, one per set of data files (built once, in `directory`), and their
    stores, opened with `open_store(path, name)`."""

    def __init__(self, directory: Path, open_store: Callable[[str, str], TripleStore]) -> None:
        self.directory = directory
        self.open_store = open_store
        self.paths: dict[tuple[Path, ...], Path] = {}
        self.stores: dict[tuple[Path, ...], TripleStore] = {}

    def path(self, files: tuple[Path, ...]) -> Path:
        path = self.paths.get(files)
        if path is None:
            name = f"d{len(self.paths)}"
            # no data file: an empty graph (the writer makes an empty HDT); blank nodes kept
            # apart per file and per HDT file (a graph's file read again for another graph)
            data = b"".join(to_ntriples(f, blank_prefix=f"{name}f{i}x") for i, f in enumerate(files))
            path = self.paths[files] = write_hdt(data, self.directory, name)
        return path

    def store(self, files: tuple[Path, ...]) -> TripleStore:
        store = self.stores.get(files)
        if store is None:
            path = self.path(files)
            store = self.stores[files] = self.open_store(str(path), path.stem)
        return store

    def graphs(self, case: Case) -> dict[str | None, TripleStore]:
        """A test's dataset: the default graph (its qt:data merged), and a named graph for
        each of graph_files (its IRI: the file's)."""
        graphs: dict[str | None, TripleStore] = {None: self.store(case.data)}
        for path in graph_files(case):
            graphs[path.as_uri()] = self.store((path,))
        return graphs


# -- answers --


def check_select(
    expected: Results, head: list[str], rows: list[tuple[str | None, ...]], value_compared: bool = False, note: str = ""
) -> None:
    """Rows of dictionary-syntax terms against the expected SELECT results."""
    got = [{v: from_dictionary(t) for v, t in zip(head, row, strict=True) if t is not None} for row in rows]
    check_solutions(expected, head, got, value_compared=value_compared, note=note)


def check_solutions(
    expected: Results,
    variables: list[str],
    got: list[Solution],
    *,
    lossy_csv: bool = False,
    value_compared: bool = False,
    note: str = "",
) -> None:
    """Solutions (`lossy_csv`: read from CSV) against the expected SELECT results."""
    assert expected.variables is not None and expected.solutions is not None, "expected SELECT results"
    assert sorted(variables) == sorted(expected.variables), f"projected variables differ: {variables}"
    wanted = expected.solutions
    if expected.lossy_csv and not lossy_csv:
        got = [{v: csv_cell(t) for v, t in s.items()} for s in got]
    if value_compared:
        wanted = [{v: by_value(t) for v, t in s.items()} for s in wanted]
        got = [{v: by_value(t) for v, t in s.items()} for s in got]
    assert same_solutions(wanted, got), (
        f"solutions differ{note}\nexpected {len(wanted)}:\n{describe(wanted)}\ngot {len(got)}:\n{describe(got)}"
    )


GRAPH_FORMATS = {".ttl": "turtle", ".nt": "nt", ".rdf": "xml"}  # rdflib's names


def read_graph(path: Path) -> rdflib.Graph:
    """An expected graph (CONSTRUCT, DESCRIBE), its own IRI as base."""
    return rdflib.Graph().parse(path, format=GRAPH_FORMATS[path.suffix], publicID=path.as_uri())


def check_graph(expected: rdflib.Graph, got: rdflib.Graph) -> None:
    """The graph, up to blank node renaming."""
    assert isomorphic(expected, got), f"graphs differ\nexpected:\n{_nt(expected)}\ngot:\n{_nt(got)}"


def graph_of(triples: list[tuple[str, str, str]]) -> rdflib.Graph:
    """Triples of dictionary-syntax terms as a graph."""
    graph = rdflib.Graph()
    for s, p, o in triples:
        graph.add((to_rdflib(s), to_rdflib(p), to_rdflib(o)))
    return graph


def to_rdflib(term: str) -> rdflib.term.Node:
    """A dictionary-syntax term as rdflib's (the independent reference for graphs)."""
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        return rdflib.Literal(lexical, lang=lang, datatype=rdflib.URIRef(datatype) if datatype else None)
    if term.startswith("_:"):
        return rdflib.BNode(term[2:])
    return rdflib.URIRef(term)


def _nt(graph: rdflib.Graph) -> str:
    return "\n".join(sorted(line for line in graph.serialize(format="nt").splitlines() if line))
