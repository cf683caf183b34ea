"""Parsing: errors with positions, and the shape cache (constants swapped for placeholders)."""

from __future__ import annotations

import pytest

from quanta.sparql.errors import QuerySyntaxError
from quanta.sparql.parse import _parse_shape, normalize, parse


def test_syntax_error_has_line_and_column() -> None:
    with pytest.raises(QuerySyntaxError) as error:
        parse('SELECT * WHERE {\n  ?s <http://example.org/p> "x" ;\n  ?o }')
    assert (error.value.line, error.value.column) == (3, 3)  # where `?o` starts
    assert "line 3, column 3" in str(error.value)


def test_instances_of_one_template_share_a_parse() -> None:
    _parse_shape.cache_clear()
    parse('SELECT * WHERE { ?s <http://example.org/p1> "a" }')
    parse('SELECT * WHERE { ?s <http://example.org/p2> "b\\"c" }')
    assert _parse_shape.cache_info().hits == 1


def test_normalize_keeps_what_the_parser_needs() -> None:
    text = (
        "PREFIX x: <http://x/> BASE <http://b/> SELECT * WHERE { ?s <http://p> <rel> ; x:q "
        '"1"^^<http://www.w3.org/2001/XMLSchema#integer>, "s"@en FILTER(<http://f>(?s)) }'
    )
    shape, constants = normalize(text)
    assert "PREFIX x: <http://x/>" in shape and "BASE <http://b/>" in shape
    assert "<rel>" in shape and "<http://f>(?s)" in shape
    assert '"1"^^<http://www.w3.org/2001/XMLSchema#integer>' in shape
    assert sorted(constants.values()) == ["http://p", "s"]


def test_normalize_looks_past_white_space() -> None:
    text = (
        'prefix y:<http://y/>\nSELECT * WHERE { ?s <http://p> "2" ^^ <http://www.w3.org/2001/XMLSchema#integer> ;'
        ' <http://q> "3"^^\n  <http://www.w3.org/2001/XMLSchema#decimal> FILTER(<http://g> (?s)) }'
    )
    shape, constants = normalize(text)
    assert "y:<http://y/>" in shape and "<http://g> (?s)" in shape
    assert '"2" ^^ <http://www.w3.org/2001/XMLSchema#integer>' in shape
    assert '"3"^^\n  <http://www.w3.org/2001/XMLSchema#decimal>' in shape
    assert sorted(constants.values()) == ["http://p", "http://q"]


def test_what_the_server_refuses_comes_with_the_parse() -> None:
    assert parse("SELECT DISTINCT ?s WHERE { ?s ?p ?o } ORDER BY ?s").refusals == ("DISTINCT", "ORDER BY")
    assert parse('SELECT * WHERE { ?s <http://example.org/p> "x" }').refusals == ()
    assert parse("SELECT * WHERE { ?s <http://example.org/p>+ ?o }").refusals == ("property path",)


def test_placeholders_map_back_to_the_constants() -> None:
    parsed = parse('SELECT * WHERE { ?s <http://example.org/p> "a\\"b" }')
    ((s, p, o),) = parsed.algebra.algebra.p.p.triples
    assert str(parsed.constant(p)) == "http://example.org/p"
    assert str(parsed.constant(o)) == 'a"b'
    assert parsed.constant(s) == s


def test_an_inverse_iri_in_a_negated_property_set_is_kept() -> None:
    """rdflib's grammar dropped it (quanta.sparql.parse mends it)."""
    parsed = parse("SELECT * WHERE { ?s !(<http://x/a>|^<http://x/b>) ?o }")
    (triple,) = parsed.algebra.algebra.p.p.triples
    _, second = triple[1].args
    assert second.name == "InversePath" and str(parsed.constant(second.part)) == "http://x/b"


def test_each_service_pattern_has_its_own_text() -> None:
    """rdflib gave every SERVICE the text of the query's first one."""
    parsed = parse("SELECT * WHERE { SERVICE <http://e1/> { ?s ?p ?o } SERVICE <http://e2/> { ?s ?q ?z } }")
    join = parsed.algebra.algebra.p.p
    assert "?p ?o" in join.p1.service_string and "?q ?z" in join.p2.service_string
