"""Result and graph formats, written from dictionary-syntax terms and read back by
pyoxigraph (the independent parser); SPARQL JSON read back into the same rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import pyoxigraph as ox
import pytest

from quanta.sparql.graphs import GRAPH_FORMATS, Triple, graph_writer, write_graph
from quanta.sparql.reader import read_json, term_from_json
from quanta.sparql.results import FORMATS, Unrepresentable, plain_term, write, writer
from quanta.sparql.results import RowLike as Row
from quanta.sparql.terms import iri_ref, nt_term, split_literal

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
# Dictionary syntax: lexical forms raw, between quotes.
TERMS = [
    f"{EX}a",
    f"{EX}ü/path?q=1#frag",
    '"plain"',
    '"tab\there, and a comma"',
    '"quote " and backslash \\"',
    '"line\nbreak\r"',
    '"café"@de',
    '"Hello"@en-gb',
    '"emoji 😀"',
    '"ctrl \x01 del \x7f"',
    f'"1"^^<{XSD}integer>',
    f'"01"^^<{XSD}integer>',
    '"<&> in xml"',
    '""',
    "_:b1",
]
HEAD = ["s", "o", "x"]
ROWS: list[Row] = [
    (f"{EX}s{i}", term, None if i % 3 == 0 else TERMS[(i * 7) % len(TERMS)]) for i, term in enumerate(TERMS)
]
# XML 1.0 cannot carry U+0001, even as a character reference: its writer refuses those rows.
XML_ROWS = [row for row in ROWS if not any(term and "\x01" in term for term in row)]


def rows_for(fmt: str) -> list[Row]:
    return XML_ROWS if fmt == "xml" else ROWS


def ox_term(term: str) -> ox.NamedNode | ox.BlankNode | ox.Literal:
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        if lang:
            return ox.Literal(lexical, language=lang)
        return ox.Literal(lexical, datatype=ox.NamedNode(datatype or XSD + "string"))
    if term.startswith("_:"):
        return ox.BlankNode(term[2:])
    return ox.NamedNode(term)


def expected(rows: Sequence[Row]) -> list[list[object]]:
    return [[None if t is None else ox_term(t) for t in row] for row in rows]


@pytest.mark.parametrize("fmt", ["json", "xml", "tsv"])
def test_pyoxigraph_reads_what_is_written(fmt: str) -> None:
    rows = rows_for(fmt)
    parsed = ox.parse_query_results(write(fmt, HEAD, rows), format=getattr(ox.QueryResultsFormat, fmt.upper()))
    assert isinstance(parsed, ox.QuerySolutions)
    assert [v.value for v in parsed.variables] == HEAD
    assert [[s[v] for v in HEAD] for s in parsed] == expected(rows)


def test_xml_refuses_a_character_it_cannot_carry() -> None:
    with pytest.raises(Unrepresentable, match="U\\+0001"):
        write("xml", HEAD, ROWS)


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize("answer", [True, False])
def test_ask(fmt: str, answer: bool) -> None:
    parsed = ox.parse_query_results(write(fmt, [], [], answer), format=getattr(ox.QueryResultsFormat, fmt.upper()))
    assert isinstance(parsed, ox.QueryBoolean) and bool(parsed) is answer


def test_ask_in_csv_and_tsv() -> None:
    """The SPARQL 1.1 CSV/TSV note has no boolean form; this is the W3C tests' (and Jena's)."""
    assert write("tsv", [], [], True) == "?_askResult\ntrue\n"
    assert write("csv", [], [], False) == "_askResult\r\nfalse\r\n"


def test_csv_is_text_and_quoted() -> None:
    lines = list(csv.reader(io.StringIO(write("csv", HEAD, ROWS), newline="")))
    assert lines[0] == HEAD
    assert lines[1:] == [["" if t is None else plain_term(t) for t in row] for row in ROWS]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_document_streams_in_chunks(fmt: str) -> None:
    """Page after page, as an endpoint streams them: the same bytes as one write."""
    out, rows = writer(fmt), rows_for(fmt)
    streamed = out.head(HEAD) + "".join(out.rows(rows[i : i + 4]) for i in range(0, len(rows), 4))
    streamed += out.rows([]) + out.end()
    assert streamed == write(fmt, HEAD, rows)
    assert out.media_type == FORMATS[fmt]


def test_empty_results() -> None:
    parsed = ox.parse_query_results(write("json", HEAD, []), format=ox.QueryResultsFormat.JSON)
    assert isinstance(parsed, ox.QuerySolutions) and list(parsed) == []


def test_json_reads_back_into_the_same_rows() -> None:
    results = read_json(write("json", HEAD, ROWS))
    assert (results.head, results.rows, results.boolean) == (HEAD, ROWS, None)
    assert read_json(write("json", [], [], False)).boolean is False


def test_json_from_another_engine() -> None:
    """pyoxigraph's own SPARQL JSON (explicit xsd:string, upper-case tags) gives dictionary syntax."""
    store = ox.Store()
    store.add(
        ox.Quad(ox.NamedNode(f"{EX}s"), ox.NamedNode(f"{EX}p"), ox.Literal("x", datatype=ox.NamedNode(XSD + "string")))
    )
    store.add(ox.Quad(ox.NamedNode(f"{EX}s"), ox.NamedNode(f"{EX}p"), ox.Literal("Hi", language="EN-GB")))
    store.add(ox.Quad(ox.BlankNode("n"), ox.NamedNode(f"{EX}p"), ox.Literal("7", datatype=ox.NamedNode(EX + "dt"))))
    solutions = store.query("SELECT ?s ?o ?none WHERE { ?s ?p ?o OPTIONAL { ?s <http://nowhere> ?none } }")
    assert isinstance(solutions, ox.QuerySolutions)
    document = solutions.serialize(format=ox.QueryResultsFormat.JSON)
    assert document is not None
    results = read_json(document)
    assert results.head == ["s", "o", "none"]
    assert sorted(results.rows, key=str) == sorted(
        [(f"{EX}s", '"x"', None), (f"{EX}s", '"Hi"@en-gb', None), ("_:n", f'"7"^^<{EX}dt>', None)], key=str
    )


def test_older_json_terms() -> None:
    assert (
        term_from_json({"type": "typed-literal", "value": "1", "datatype": XSD + "integer"}) == f'"1"^^<{XSD}integer>'
    )
    with pytest.raises(ValueError, match="triple"):
        term_from_json({"type": "triple", "value": ""})


# -- graphs --

TRIPLES: list[Triple] = [
    (f"{EX}s1", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", f"{EX}Thing"),
    (f"{EX}s1", f"{EX}name", '"one"@en'),
    (f"{EX}s1", f"{EX}name", '"uno"@es'),
    (f"{EX}s1", f"{EX}note", '"quote " backslash \\ newline\n tab\t"'),
    (f"{EX}s2", f"{EX}knows", f"{EX}s1"),
    (f"{EX}s2", f"{EX}knows", "_:b1"),
    ("_:b1", f"{EX}age", f'"42"^^<{XSD}integer>'),
    ("_:b1", f"{EX}path", f"{EX}with.dot."),  # a local name may not end with '.'
    ("_:b1", f"{EX}path", f"{EX}ü"),
    ("http://other.org/x", f"{EX}knows", "_:b1"),
]


def ox_triples(triples: Sequence[Triple]) -> set[ox.Triple]:
    out = set()
    for s, p, o in triples:
        subject, predicate = ox_term(s), ox_term(p)
        assert not isinstance(subject, ox.Literal) and isinstance(predicate, ox.NamedNode)
        out.add(ox.Triple(subject, predicate, ox_term(o)))
    return out


@pytest.mark.parametrize("fmt", sorted(GRAPH_FORMATS))
def test_graphs_pyoxigraph_reads(fmt: str) -> None:
    text = write_graph(fmt, TRIPLES, {"ex": EX, "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#"})
    parsed = ox.parse(text.encode(), format=ox.RdfFormat.from_media_type(GRAPH_FORMATS[fmt]))
    assert {ox.Triple(q.subject, q.predicate, q.object) for q in parsed} == ox_triples(TRIPLES)


def test_turtle_groups_and_abbreviates_across_chunks() -> None:
    out = graph_writer("ttl", {"ex": EX})
    text = out.head() + "".join(out.triples(TRIPLES[i : i + 3]) for i in range(0, len(TRIPLES), 3)) + out.end()
    assert text == write_graph("ttl", TRIPLES, {"ex": EX})
    assert "ex:s1 a ex:Thing ;" in text
    assert 'ex:name "one"@en ,\n        "uno"@es ;' in text
    assert f"<{EX}with.dot.>" in text
    parsed = ox.parse(text.encode(), format=ox.RdfFormat.TURTLE)
    assert {ox.Triple(q.subject, q.predicate, q.object) for q in parsed} == ox_triples(TRIPLES)


def test_an_empty_graph() -> None:
    assert write_graph("ttl", []) == "" and write_graph("nt", []) == ""


def test_iris_that_the_syntax_does_not_allow_are_escaped() -> None:
    assert iri_ref("http://x/a b<c>") == "<http://x/a\\u0020b\\u003Cc\\u003E>"
    assert nt_term(f'"x"^^<{EX}t y>') == f'"x"^^<{EX}t\\u0020y>'


@pytest.mark.parametrize("fmt", ["rdfxml", "jsonld"])
def test_nodes_stream_across_chunks(fmt: str) -> None:
    """A subject split between two chunks is written as if the triples came at once."""
    out = graph_writer(fmt)
    text = out.head() + "".join(out.triples(TRIPLES[i : i + 2]) for i in range(0, len(TRIPLES), 2)) + out.end()
    assert text == write_graph(fmt, TRIPLES)


@pytest.mark.parametrize("fmt", sorted(GRAPH_FORMATS))
def test_every_format_writes_an_empty_graph(fmt: str) -> None:
    assert list(ox.parse(write_graph(fmt, []).encode(), format=ox.RdfFormat.from_media_type(GRAPH_FORMATS[fmt]))) == []


def test_rdfxml_refuses_a_predicate_without_an_xml_name() -> None:
    with pytest.raises(ValueError, match="does not end with an XML name"):
        write_graph("rdfxml", [(f"{EX}s", f"{EX}1", f"{EX}o")])


def test_csv_rows_are_what_the_csv_module_writes() -> None:
    rows: list[Row] = [*ROWS, (None,) * 3, ('"a,b"', '"say ""hi"""', '"x\r\ny"')]
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows([["" if t is None else plain_term(t) for t in r] for r in rows])
    assert writer("csv").rows(rows) == out.getvalue()
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow([""])
    assert writer("csv").rows([(None,)]) == out.getvalue() == '""\r\n'
