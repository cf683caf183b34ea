"""W3C SPARQL test manifests and result sets, read independently of the engine.

Nothing here imports the engine: the harness must not share the code it checks.
Which tests the server must refuse is the service's own decision, though
(`quanta.sparql.fragment`, the classifier the engine refuses through): the
evaluated tests check that it accepts nothing the engine answers wrongly.
Terms are compared in one canonical form (`Term` tuples):

    ("iri", iri)
    ("bnode", label)
    ("literal", lexical, language lower-cased or "", datatype or "")

A simple literal and an `xsd:string` literal are the same RDF 1.1 term, and
`rdf:langString` is implied by a language tag, so both datatypes are left empty.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyoxigraph
import rdflib
from rdflib import RDF, BNode, Graph, Literal, URIRef
from rdflib.collection import Collection
from rdflib.namespace import Namespace

from quanta.sparql import parse

# Keep lexical forms as written ("01"^^xsd:integer is not "1"^^xsd:integer).
rdflib.NORMALIZE_LITERALS = False

MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
QT = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-query#")
DAWGT = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#")
RS = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/result-set#")
XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

EVALUATION_TYPES = {MF.QueryEvaluationTest, MF.CSVResultFormatTest}

Term = tuple[str, ...]
Solution = dict[str, Term]


@dataclass(frozen=True)
class Case:
    """One query-evaluation test of a manifest."""

    suite: str  # the manifest's folder under sparql/, e.g. "sparql10/basic"
    name: str  # the entry's local name, e.g. "bgp-no-match"
    iri: str
    title: str
    kind: str  # local name of the rdf:type, e.g. "QueryEvaluationTest"
    query: Path
    data: tuple[Path, ...]
    graph_data: tuple[Path, ...]
    service_data: bool
    result: Path | None
    approval: str
    requires: tuple[str, ...] = field(default=())
    services: tuple[tuple[str, tuple[Path, ...]], ...] = field(default=())  # endpoint IRI, its data files

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.name}"


@dataclass
class Results:
    """A SELECT result multiset (variables, solutions) or an ASK boolean."""

    variables: list[str] | None = None
    solutions: list[Solution] | None = None
    boolean: bool | None = None
    lossy_csv: bool = False  # CSV: every term is reduced to its text (see csv_cell)


# -- manifests --


def load_cases(root: Path, manifests: list[str]) -> list[Case]:
    """Every evaluation test reachable from the manifests (paths relative to root),
    following mf:include, in manifest order."""
    cases: list[Case] = []
    seen: set[Path] = set()
    root = root.resolve()  # manifests are resolved: the root too (../shared may be a symlink)
    for manifest in manifests:
        cases += _read_manifest(root, (root / manifest).resolve(), seen)
    return cases


def _read_manifest(root: Path, path: Path, seen: set[Path]) -> list[Case]:
    if path in seen:
        return []
    seen.add(path)
    graph = Graph()
    graph.parse(path, format="turtle", publicID=path.as_uri())
    me = next(graph.subjects(RDF.type, MF.Manifest))  # `<>` or a blank node
    cases: list[Case] = []
    for include in _list(graph, me, MF.include):
        cases += _read_manifest(root, _local(include), seen)
    suite = path.parent.relative_to(root).as_posix()
    for entry in _list(graph, me, MF.entries):
        kinds = set(graph.objects(entry, RDF.type)) & EVALUATION_TYPES
        if not kinds:
            continue
        action = graph.value(entry, MF.action)
        query = graph.value(action, QT.query)
        result = graph.value(entry, MF.result)
        iri = str(entry)
        cases.append(
            Case(
                suite=suite,
                name=iri.rsplit("#", 1)[-1],
                iri=iri,
                title=str(graph.value(entry, MF.name) or ""),
                kind=str(kinds.pop()).rsplit("#", 1)[-1],
                query=_local(query),
                data=tuple(sorted(_local(d) for d in graph.objects(action, QT.data))),
                graph_data=tuple(sorted(_local(d) for d in graph.objects(action, QT.graphData))),
                service_data=graph.value(action, QT.serviceData) is not None,
                result=_local(result) if result is not None else None,
                approval=str(graph.value(entry, DAWGT.approval) or "").rsplit("#", 1)[-1],
                requires=tuple(sorted(str(r).rsplit("#", 1)[-1] for r in graph.objects(entry, MF.requires))),
                services=tuple(
                    sorted(
                        (str(graph.value(d, QT.endpoint)), tuple(sorted(_local(f) for f in graph.objects(d, QT.data))))
                        for d in graph.objects(action, QT.serviceData)
                    )
                ),
            )
        )
    return cases


def _list(graph: Graph, subject: Any, predicate: Any) -> list[Any]:
    head = graph.value(subject, predicate)
    return list(Collection(graph, head)) if head is not None else []


def _local(node: Any) -> Path:
    text = str(node)
    assert text.startswith("file://"), text
    return Path(text.removeprefix("file://"))


# -- test data --


def to_ntriples(path: Path, blank_prefix: str = "") -> bytes:
    """The file's triples as N-Triples (what the HDT converter reads), parsed
    with its own IRI as base. Lexical forms are kept exactly; blank node labels
    get `blank_prefix` so that two files never share a blank node."""
    formats = {".ttl": pyoxigraph.RdfFormat.TURTLE, ".nt": pyoxigraph.RdfFormat.N_TRIPLES}
    formats[".rdf"] = pyoxigraph.RdfFormat.RDF_XML

    def rename(term: Any) -> Any:
        return pyoxigraph.BlankNode(blank_prefix + term.value) if isinstance(term, pyoxigraph.BlankNode) else term

    quads = pyoxigraph.parse(path=str(path), format=formats[path.suffix], base_iri=path.as_uri())
    triples = [pyoxigraph.Triple(rename(q.subject), q.predicate, rename(q.object)) for q in quads]
    return pyoxigraph.serialize(triples, format=pyoxigraph.RdfFormat.N_TRIPLES) or b""


# -- expected results --


RESULT_MEDIA = {
    ".srx": "application/sparql-results+xml",
    ".srj": "application/sparql-results+json",
    ".tsv": "text/tab-separated-values",
    ".csv": "text/csv",
}


def read_results(path: Path) -> Results:
    """An expected result file: SPARQL XML/JSON/TSV/CSV results, or a result set
    written in the DAWG result-set vocabulary (Turtle or RDF/XML)."""
    if path.suffix in RESULT_MEDIA:
        return parse_results(path.read_bytes(), RESULT_MEDIA[path.suffix])
    if path.suffix in (".ttl", ".rdf"):
        return _read_result_graph(path)
    raise ValueError(f"unknown result format: {path}")


def parse_results(data: bytes, media_type: str) -> Results:
    """A SPARQL results document in one of RESULT_MEDIA's types."""
    if media_type == "text/csv":
        return _read_csv(data.decode("utf-8"))
    parsed = pyoxigraph.parse_query_results(data, format=pyoxigraph.QueryResultsFormat.from_media_type(media_type))
    if isinstance(parsed, pyoxigraph.QueryBoolean):
        return Results(boolean=bool(parsed))
    assert isinstance(parsed, pyoxigraph.QuerySolutions)
    variables = [v.value for v in parsed.variables]
    solutions = [{v: from_oxigraph(s[v]) for v in variables if s[v] is not None} for s in parsed]
    return Results(variables, solutions)


def _read_csv(text: str) -> Results:
    """CSV results are lossy: each cell is kept as text (see csv_cell)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    variables, body = rows[0], rows[1:]
    solutions = [{v: _csv_term(cell) for v, cell in zip(variables, row, strict=True) if cell} for row in body]
    return Results(variables, solutions, lossy_csv=True)


def _csv_term(cell: str) -> Term:
    return ("bnode", cell[2:]) if cell.startswith("_:") else ("text", cell)


def _read_result_graph(path: Path) -> Results:
    graph = Graph()
    graph.parse(path, format="turtle" if path.suffix == ".ttl" else "xml", publicID=path.as_uri())
    result_set = next(graph.subjects(RDF.type, RS.ResultSet), None)
    if result_set is None:
        raise ValueError(f"{path} is not a DAWG result set")
    boolean = graph.value(result_set, RS.boolean)
    if isinstance(boolean, Literal):
        return Results(boolean=bool(boolean.toPython()))
    variables = [str(v) for v in graph.objects(result_set, RS.resultVariable)]
    solutions = []
    for solution in graph.objects(result_set, RS.solution):
        row: Solution = {}
        for binding in graph.objects(solution, RS.binding):
            row[str(graph.value(binding, RS.variable))] = from_rdflib(graph.value(binding, RS.value))
        solutions.append(row)
    return Results(variables, solutions)


# -- terms --


def from_oxigraph(term: Any) -> Term:
    if isinstance(term, pyoxigraph.NamedNode):
        return ("iri", term.value)
    if isinstance(term, pyoxigraph.BlankNode):
        return ("bnode", term.value)
    return _literal(term.value, term.language, term.datatype.value)


def from_rdflib(node: Any) -> Term:
    if isinstance(node, URIRef):
        return ("iri", str(node))
    if isinstance(node, BNode):
        return ("bnode", str(node))
    assert isinstance(node, Literal), node
    return _literal(str(node), node.language, str(node.datatype) if node.datatype else None)


def from_dictionary(term: str) -> Term:
    """A term in quanta's dictionary syntax (what the engine and the clients return): IRIs
    bare, `_:label`, literals as their raw lexical form in quotes with `@lang` or
    `^^<datatype>` ('"a"b"@en' is a"b in English)."""
    if term.startswith("_:"):
        return ("bnode", term[2:])
    if not term.startswith('"'):
        return ("iri", term)
    end = term.rfind('"')
    lexical, rest = term[1:end], term[end + 1 :]
    if rest.startswith("@"):
        return _literal(lexical, rest[1:], None)
    if rest.startswith("^^<") and rest.endswith(">"):
        return _literal(lexical, None, rest[3:-1])
    assert not rest, term
    return _literal(lexical, None, None)


def _literal(lexical: str, language: str | None, datatype: str | None) -> Term:
    if language:
        return ("literal", lexical, language.lower(), "")
    return ("literal", lexical, "", "" if datatype in (None, XSD_STRING, RDF_LANGSTRING) else datatype)


def csv_cell(term: Term) -> Term:
    """What survives of a term in SPARQL CSV: IRIs and literals become their text."""
    if term[0] == "bnode":
        return term
    return ("text", term[1])


NUMERIC = {XSD + t for t in ("integer", "decimal", "float", "double")}


def by_value(term: Term) -> Term:
    """A numeric literal as its datatype and value ("1.0E0"^^xsd:float is "1"^^xsd:float);
    for the few tests whose expected lexical forms are not the ones any
    canonicalization gives (see skips.VALUE_COMPARED)."""
    if term[0] != "literal" or term[3] not in NUMERIC:
        return term
    lexical = term[1].strip()
    try:
        value = Decimal(lexical) if term[3] != XSD + "double" and term[3] != XSD + "float" else float(lexical)
    except (InvalidOperation, ValueError):
        return term
    return ("number", term[3], str(value.normalize() if isinstance(value, Decimal) else value))


def show(term: Term) -> str:
    """Readable N-Triples-like text of a term, for failure messages."""
    kind = term[0]
    if kind == "iri":
        return f"<{term[1]}>"
    if kind == "bnode":
        return f"_:{term[1]}"
    if kind == "text":
        return repr(term[1])
    if kind == "number":
        return f"{term[2]}^^<{term[1]}> (by value)"
    _, lexical, language, datatype = term
    suffix = f"@{language}" if language else f"^^<{datatype}>" if datatype else ""
    return f"{lexical!r}{suffix}"


# -- the server fragment --


def client_side(text: str) -> list[str]:
    """What puts a query outside the server fragment (empty if it is inside),
    by the service's one classifier (`quanta.sparql.fragment`), on the algebra
    of the service's own parser."""
    return list(parse.parse(text).refusals)


# -- comparison --


def _key(solution: Solution) -> tuple[tuple[str, Term], ...]:
    return tuple(sorted(solution.items()))


def _shape(solution: Solution) -> tuple[tuple[str, Term], ...]:
    """The solution with blank node labels erased: isomorphic solutions share it."""
    return tuple(sorted((v, ("bnode", "") if t[0] == "bnode" else t) for v, t in solution.items()))


def same_solutions(expected: list[Solution], got: list[Solution]) -> bool:
    """Equal as multisets, with blank nodes equal up to one consistent renaming
    (a bijection between the labels on each side)."""
    if len(expected) != len(got) or Counter(map(_shape, expected)) != Counter(map(_shape, got)):
        return False
    has_bnode = [s for s in expected if any(t[0] == "bnode" for t in s.values())]
    plain = [s for s in expected if not any(t[0] == "bnode" for t in s.values())]
    got_bnode = [s for s in got if any(t[0] == "bnode" for t in s.values())]
    got_plain = [s for s in got if not any(t[0] == "bnode" for t in s.values())]
    if Counter(map(_key, plain)) != Counter(map(_key, got_plain)):
        return False
    # most constrained (fewest candidates) first keeps the search small
    candidates = {id(e): [g for g in got_bnode if _shape(g) == _shape(e)] for e in has_bnode}
    has_bnode.sort(key=lambda e: len(candidates[id(e)]))
    return _match(has_bnode, 0, candidates, set(), {}, {})


def _match(
    expected: list[Solution],
    index: int,
    candidates: dict[int, list[Solution]],
    used: set[int],
    forward: dict[str, str],
    backward: dict[str, str],
) -> bool:
    if index == len(expected):
        return True
    e = expected[index]
    for g in candidates[id(e)]:
        if id(g) in used:
            continue
        added = _extend(e, g, forward, backward)
        if added is None:
            continue
        used.add(id(g))
        if _match(expected, index + 1, candidates, used, forward, backward):
            return True
        used.discard(id(g))
        for a, b in added:
            del forward[a], backward[b]
    return False


def _extend(
    e: Solution, g: Solution, forward: dict[str, str], backward: dict[str, str]
) -> list[tuple[str, str]] | None:
    """Extend the bijection so that e maps onto g; None (bijection unchanged) if impossible."""
    added: list[tuple[str, str]] = []
    for var, term in e.items():
        other = g[var]
        if term[0] != "bnode":
            continue  # equal by shape
        a, b = term[1], other[1]
        if forward.get(a, b) != b or backward.get(b, a) != a:
            for x, y in added:
                del forward[x], backward[y]
            return None
        if a not in forward:
            forward[a], backward[b] = b, a
            added.append((a, b))
    return added


def describe(solutions: list[Solution], limit: int = 40) -> str:
    """Sorted solutions, one a line, for failure messages."""
    lines = sorted(" ".join(f"?{v}={show(t)}" for v, t in sorted(s.items())) or "{}" for s in solutions)
    more = f"\n  ... {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(f"  {line}" for line in lines[:limit]) + more
