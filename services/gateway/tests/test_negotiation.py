"""Content negotiation: what each Accept header gets, after Oxigraph's server
tests (get_query_accept_*) and what real clients send (SPARQLWrapper, rdflib,
Jena, Comunica, YASGUI)."""

from __future__ import annotations

import pytest

from quanta.gateway.sparql_endpoint.negotiation import GRAPHS, RESULTS, accepted, negotiate, parse_accept


def results(accept: str | None) -> str | None:
    offer = negotiate(accept, RESULTS)
    return offer.format if offer else None


def graphs(accept: str | None) -> str | None:
    offer = negotiate(accept, GRAPHS)
    return offer.format if offer else None


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "json"),
        ("", "json"),
        ("*/*", "json"),
        ("text/*", "csv"),
        ("application/sparql-results+json;charset=utf-8", "json"),
        ("application/sparql-results+xml", "xml"),
        ("text/tab-separated-values", "tsv"),
        ("application/foo", None),
        ("text/foo;q=0.5 , text/tab-separated-values ; q = 0.7", "tsv"),  # explicit priority
        ("text/csv,text/foo", "csv"),  # implicit priority
        ("text/foo;q=0.9,text/csv", "csv"),  # implicit and explicit
        ("text/csv;q=0.5,application/sparql-results+xml;q=0.6", "xml"),
        ("*/*;q=0.1,text/csv", "csv"),
        ("text/csv;q=0,*/*", "json"),  # q=0 refuses
        ("application/sparql-results+json;q=0,text/*;q=0.2", "csv"),
        ("*/*, application/sparql-results+json;q=0", "xml"),  # the most specific range decides
        ("application/json", "json"),
        ("text/xml", "xml"),
        ("garbage", None),
        ("text/csv;q=2", None),  # q beyond 1: malformed, left out
        ("text/csv;q=abc", None),
    ],
)
def test_results_negotiation(accept: str | None, expected: str | None) -> None:
    assert results(accept) == expected


@pytest.mark.parametrize(
    ("client", "accept", "expected"),
    [
        (
            "SPARQLWrapper JSON",
            "application/sparql-results+json,application/json,text/javascript,application/javascript",
            "json",
        ),
        ("SPARQLWrapper / rdflib XML", "application/sparql-results+xml", "xml"),
        (
            "Jena",
            "application/sparql-results+json, application/sparql-results+xml;q=0.9, "
            "text/tab-separated-values;q=0.7, text/csv;q=0.5, application/json;q=0.2, */*;q=0.1",
            "json",
        ),
        ("Comunica", "application/sparql-results+json;q=1.0,application/sparql-results+xml;q=0.7", "json"),
        ("YASGUI", "application/sparql-results+json,*/*;q=0.9", "json"),
        ("a browser", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "xml"),
    ],
)
def test_what_clients_send_for_results(client: str, accept: str, expected: str) -> None:
    assert results(accept) == expected, client


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "ttl"),
        ("*/*", "ttl"),
        ("application/n-triples,*/*;q=0.9", "nt"),  # YASGUI
        ("application/rdf+xml", "rdfxml"),  # SPARQLWrapper's and rdflib's default for graphs
        ("application/ld+json,application/x-json+ld", "jsonld"),
        ("text/turtle;q=0.5,application/n-triples", "nt"),
        ("text/plain", "nt"),
        ("application/sparql-results+json", None),
    ],
)
def test_graph_negotiation(accept: str | None, expected: str | None) -> None:
    assert graphs(accept) == expected


def test_aliases_answer_with_the_canonical_media_type() -> None:
    offer = negotiate("application/json", RESULTS)
    assert offer is not None and offer.content_type == "application/sparql-results+json"
    offer = negotiate("text/csv", RESULTS)
    assert offer is not None and offer.content_type == "text/csv; charset=utf-8"


def test_accept_ranges_are_read_leniently() -> None:
    ranges = parse_accept("text/csv ; q = 0.5, */*, bad, */csv, TEXT/TSV;level=1")
    assert [(r.type, r.subtype, r.q) for r in ranges] == [("text", "csv", 0.5), ("*", "*", 1.0), ("text", "tsv", 1.0)]


def test_the_406_message_lists_canonical_types() -> None:
    assert accepted(RESULTS) == (
        "application/sparql-results+json, application/sparql-results+xml, text/csv, text/tab-separated-values"
    )
