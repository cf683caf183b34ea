"""What every run of the W3C query-evaluation suites shares, whatever runs the
queries (the engine in-process, the smart client, the HTTP endpoint):
the test data as HDT files (a test's dataset: its default graph and named
graphs), the query text, and the comparison of answers with the expected
results (solutions as multisets, booleans, graphs up to isomorphism).

Rows are tuples of terms in quanta's dictionary syntax (quanta.sparql.terms:
raw lexical forms in quotes), as the client and the engine give them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import rdflib
from manifest import (
    Case,
    Results,
    Solution,
    by_value,
    csv_cell,
    describe,
    from_rdflib,
    same_solutions,
    to_ntriples,
)
from rdflib.compare import isomorphic
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery

from quanta.engine.testing import shared_dir, write_hdt
from quanta.sparql.terms import to_rdflib

ROOT = Path(os.environ.get("QUANTA_W3C_TESTS", shared_dir() / "conformance" / "w3c-rdf-tests")) / "sparql"
MANIFESTS = [
    "sparql10/manifest-evaluation.ttl",
    "sparql10/extended-manifest-evaluation.ttl",
    "sparql11/manifest-sparql11-query.ttl",
    "sparql11/manifest-sparql11-results.ttl",
    "sparql11/manifest-sparql11-fed.ttl",
]


def query_text(case: Case) -> str:
    """The query, with its own location as base IRI (as the manifests assume)."""
    return f"BASE <{case.query.as_uri()}>\n{case.query.read_text(encoding='utf-8')}"


def dataset_clause(text: str) -> tuple[list[str], list[str]]:
    """The query's FROM and FROM NAMED IRIs."""
    clauses = translateQuery(parseQuery(text)).algebra.get("datasetClause") or []
    default = [str(c.default) for c in clauses if c.get("default") is not None and c.default != "default"]
    named = [str(c.named) for c in clauses if c.get("named") is not None and c.named != "named"]
    return default, named


class Files:
    """HDT files, one per set of data files (built once, in `directory`),
    opened with `open_store(path, name)`."""

    def __init__(self, directory: Path, open_store: Any) -> None:
        self.directory = directory
        self.open_store = open_store
        self.stores: dict[tuple[Path, ...], Any] = {}

    def store(self, files: tuple[Path, ...]) -> Any:
        store = self.stores.get(files)
        if store is None:
            name = f"d{len(self.stores)}"
            # no data file: an empty graph (the writer makes an empty HDT); blank nodes kept apart per file
            data = b"".join(to_ntriples(f, blank_prefix=f"f{i}x") for i, f in enumerate(files))
            store = self.stores[files] = self.open_store(str(write_hdt(data, self.directory, name)), name)
        return store

    def graphs(self, case: Case, text: str) -> dict[str | None, Any]:
        """A test's dataset: the default graph (its qt:data merged), and a named
        graph for each qt:graphData file and each file the query names in
        FROM or FROM NAMED (its IRI: the file's)."""
        graphs: dict[str | None, Any] = {None: self.store(case.data)}
        default, named = dataset_clause(text)
        files = [*case.graph_data, *(_local(iri) for iri in [*default, *named])]
        for path in files:
            if path is not None and path.exists():
                graphs[path.as_uri()] = self.store((path,))
        return graphs


def _local(iri: str) -> Path | None:
    return Path(iri.removeprefix("file://")) if iri.startswith("file://") else None


# -- answers --


def term(value: str) -> tuple[str, ...]:
    """A dictionary-syntax term as the manifests' canonical form."""
    return from_rdflib(to_rdflib(value))


def check_select(
    expected: Results, head: list[str], rows: list[tuple[str | None, ...]], value_compared: bool = False
) -> None:
    assert expected.variables is not None and expected.solutions is not None, "expected SELECT results"
    assert sorted(head) == sorted(expected.variables), f"projected variables differ: {head} != {expected.variables}"
    got: list[Solution] = [{v: term(t) for v, t in zip(head, row, strict=True) if t is not None} for row in rows]
    wanted = expected.solutions
    if expected.lossy_csv:
        got = [{v: csv_cell(t) for v, t in s.items()} for s in got]
    if value_compared:
        wanted = [{v: by_value(t) for v, t in s.items()} for s in wanted]
        got = [{v: by_value(t) for v, t in s.items()} for s in got]
    assert same_solutions(wanted, got), (
        f"solutions differ\nexpected {len(wanted)}:\n{describe(wanted)}\ngot {len(got)}:\n{describe(got)}"
    )


def check_graph(expected: Path, triples: list[tuple[str, str, str]]) -> None:
    """CONSTRUCT and DESCRIBE: the graph, up to blank node renaming."""
    wanted = rdflib.Graph()
    wanted.parse(expected, format="turtle" if expected.suffix in (".ttl", ".nt") else "xml", publicID=expected.as_uri())
    got = rdflib.Graph()
    for s, p, o in triples:
        got.add((to_rdflib(s), to_rdflib(p), to_rdflib(o)))  # type: ignore[arg-type]
    assert isomorphic(wanted, got), (
        f"graphs differ\nexpected {len(wanted)}:\n{wanted.serialize(format='nt')}\n"
        f"got {len(got)}:\n{got.serialize(format='nt')}"
    )
