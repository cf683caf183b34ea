"""The server fragment: what the server evaluates, and the name of what it does not.

The engine's compiler refuses through `fragment.check` (its tests and the W3C
suite check that it does); here the classifier itself, on queries and on the
algebra nodes the smart client decomposes.
"""

from __future__ import annotations

from typing import Any

import pytest

from quanta.sparql import fragment
from quanta.sparql.errors import UnsupportedQuery
from quanta.sparql.parse import parse

PREFIXES = "PREFIX : <http://example.org/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"


def algebra(query: str) -> Any:
    return parse(PREFIXES + query).algebra.algebra


SERVED = [
    "SELECT * WHERE { ?s :p ?o }",
    "SELECT ?s WHERE { ?s :p ?o . ?o :q ?z }",
    "SELECT * WHERE { { ?s :p ?o } UNION { ?s :q ?o } UNION { ?s :r ?o } }",
    "SELECT * WHERE { ?s :p ?o FILTER(?o > 3 && STRSTARTS(STR(?s), 'http') || REGEX(?o, 'a', 'i')) }",
    "SELECT * WHERE { ?s :p ?o FILTER(?o IN (1, 2) && ?o NOT IN (3)) FILTER(true) }",
    "SELECT * WHERE { ?s :p ?o BIND(CONCAT(LCASE(?o), '!') AS ?x) BIND(COALESCE(?y, 1) AS ?z) }",
    "SELECT * WHERE { ?s :p ?o BIND(xsd:integer(?o) AS ?i) BIND(IRI(?o) AS ?iri) BIND(BNODE(?o) AS ?b) }",
    "SELECT * WHERE { ?s :p ?o VALUES (?s ?o) { (:a 1) (UNDEF 2) } }",
    "SELECT ?s (?o + 1 AS ?n) WHERE { ?s :p ?o }",
    "SELECT REDUCED ?s WHERE { ?s :p ?o } LIMIT 10 OFFSET 5",
    "ASK { ?s :p ?o }",
    "SELECT * WHERE { ?s :p/:q/^:r ?o }",
    "SELECT * WHERE { ?s ^(:p/:q) ?o }",
    "SELECT * WHERE { }",
]


@pytest.mark.parametrize("query", SERVED)
def test_the_server_fragment(query: str) -> None:
    assert fragment.query_refusals(algebra(query)) == []
    fragment.check(algebra(query))  # does not raise


REFUSED = {
    # MINUS where a solution of the right side may leave the shared variable unbound
    "MINUS": "SELECT * WHERE { ?s :p ?o MINUS { { ?o :q ?z } UNION { ?x :q ?z } } }",
    "DISTINCT": "SELECT DISTINCT ?s WHERE { ?s :p ?o }",
    "ORDER BY": "SELECT ?s WHERE { ?s :p ?o } ORDER BY ?s",
    "GROUP BY": "SELECT ?s WHERE { ?s :p ?o } GROUP BY ?s",
    "aggregates": "SELECT (COUNT(*) AS ?n) WHERE { ?s :p ?o }",
    "GRAPH": "SELECT * WHERE { GRAPH ?g { ?s :p ?o } }",
    "SERVICE": "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s :p ?o } }",
    "subquery": "SELECT * WHERE { { SELECT ?s WHERE { ?s :p ?o } LIMIT 1 } }",
    "property path": "SELECT * WHERE { ?s :p+ ?o }",
    "FROM": "SELECT * FROM <http://example.org/g> WHERE { ?s :p ?o }",
    "EXISTS": "SELECT * WHERE { ?s :p ?o FILTER(?o = :a || EXISTS { ?o :q ?z }) }",  # not a conjunct
    "NOT EXISTS": "SELECT * WHERE { ?s :p ?o FILTER NOT EXISTS { ?o :q ?z OPTIONAL { ?z :r ?y } } }",
    "NOW": "SELECT * WHERE { ?s :p ?o BIND(NOW() AS ?t) }",
    "RAND": "SELECT * WHERE { ?s :p ?o FILTER(RAND() < 0.5) }",
    "UUID": "SELECT * WHERE { ?s :p ?o BIND(UUID() AS ?u) }",
    "STRUUID": "SELECT * WHERE { ?s :p ?o BIND(STRUUID() AS ?u) }",
    "BNODE": "SELECT * WHERE { ?s :p ?o BIND(BNODE() AS ?b) }",
    "<http://example.org/f>": "SELECT * WHERE { ?s :p ?o FILTER(:f(?o)) }",
    "<http://www.w3.org/2001/XMLSchema#date>": "SELECT * WHERE { ?s :p ?o BIND(xsd:date(?o) AS ?d) }",
    "CONSTRUCT": "CONSTRUCT { ?s :q ?o } WHERE { ?s :p ?o }",
    "DESCRIBE": "DESCRIBE ?s WHERE { ?s :p ?o }",
}


@pytest.mark.parametrize("operator", REFUSED)
def test_outside_the_fragment_is_named(operator: str) -> None:
    query = algebra(REFUSED[operator])
    assert fragment.query_refusals(query)[0] == operator
    with pytest.raises(UnsupportedQuery) as raised:
        fragment.check(query)
    assert raised.value.operator == operator
    assert "client" in str(raised.value)


@pytest.mark.parametrize("path", [":p*", ":p?", ":p|:q", "!:p", "!(:p|^:q)", "^(:p|:q)", "(:p/:q)+", "(:p*)+"])
def test_closures_alternatives_and_negations_are_client_side(path: str) -> None:
    """Between two variables nothing else binds (a closure has no end to start from)."""
    assert fragment.query_refusals(algebra(f"SELECT * WHERE {{ ?s {path} ?o }}")) == ["property path"]


@pytest.mark.parametrize(
    "pattern",
    [
        ":a :p* ?o",
        "?s (:p|^:q)+ :b",
        ":a (:p/!:q)? ?o",
        "?s :p/:q* ?o",  # the sequence's link is bound by its first step
        "?s :type :T . ?s :p+ ?o . ?o :q* ?z",  # anchored by a pattern, then by the closure before
    ],
)
def test_closures_with_an_anchored_end_are_the_servers(pattern: str) -> None:
    assert fragment.query_refusals(algebra(f"SELECT * WHERE {{ {pattern} }}")) == []


def test_every_operator_once_in_pre_order() -> None:
    query = algebra(
        "SELECT DISTINCT ?s WHERE { ?s :p ?o OPTIONAL { ?o :q ?z FILTER NOT EXISTS { ?z :r ?s } } "
        "OPTIONAL { ?o :r ?y } } ORDER BY ?s"
    )
    assert fragment.query_refusals(query) == ["DISTINCT", "ORDER BY", "NOT EXISTS"]


def test_aggregates_name_the_grouping_not_each_function() -> None:
    query = algebra("SELECT ?s (SUM(?o) AS ?t) (GROUP_CONCAT(?o) AS ?g) WHERE { ?s :p ?o } GROUP BY ?s")
    assert fragment.query_refusals(query) == ["GROUP BY"]


def test_an_aggregate_expression_names_its_function() -> None:
    query = algebra("SELECT (COUNT(?o) AS ?n) (GROUP_CONCAT(?o) AS ?g) WHERE { ?s :p ?o }")
    aggregate_join = query.p.p
    while aggregate_join.name == "Extend":  # one per projected aggregate
        aggregate_join = aggregate_join.p
    assert aggregate_join.name == "AggregateJoin"
    assert [fragment.refusal(a) for a in aggregate_join.A] == ["COUNT", "GROUP_CONCAT"]


def test_an_optional_is_the_servers_with_what_it_holds() -> None:
    """OPTIONAL, its condition included, is the server's; what is inside it decides the rest."""
    query = algebra("SELECT * WHERE { ?s :p ?o OPTIONAL { ?o :q ?z FILTER(?z > 1) } }")
    left_join = query.p.p
    assert fragment.refusal(left_join) is None
    assert fragment.server_evaluates(left_join)
    inner = algebra("SELECT * WHERE { ?s :p ?o OPTIONAL { ?o :q ?z MINUS { { ?z :r ?s } UNION { ?y :r ?s } } } }")
    assert fragment.refusals(inner.p.p) == ["MINUS"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * WHERE { ?s :p ?o MINUS { ?o :q ?z } }",
        "SELECT * WHERE { ?s :p ?o MINUS { ?x :q ?z } }",  # nothing shared: removes nothing
        "SELECT * WHERE { ?s :p ?o FILTER EXISTS { ?o :q ?z } }",
        "SELECT * WHERE { ?s :p ?o FILTER(?o != :a && NOT EXISTS { ?o :q ?z FILTER(?z > ?o) }) }",
        "SELECT * WHERE { ?s :p ?o FILTER NOT EXISTS { { ?o :q ?z } UNION { ?o :r ?z BIND(1 AS ?y) } } }",
    ],
)
def test_minus_and_exists_conjuncts_are_the_servers(query: str) -> None:
    """A MINUS whose right side binds the shared variables in every solution, and a FILTER's
    (NOT) EXISTS conjunct over a pattern without OPTIONAL, MINUS or EXISTS."""
    assert fragment.query_refusals(algebra(query)) == []


def test_exists_elsewhere_is_the_clients() -> None:
    """In an expression other than a FILTER's conjunct, or over a pattern with a MINUS."""
    bind = algebra("SELECT * WHERE { ?s :p ?o BIND(EXISTS { ?o :q ?z } AS ?b) }")
    assert fragment.query_refusals(bind) == ["EXISTS"]
    nested = algebra("SELECT * WHERE { ?s :p ?o FILTER EXISTS { ?o :q ?z MINUS { ?z :r ?y } } }")
    assert fragment.query_refusals(nested) == ["EXISTS"]


def test_a_subquery_is_served_on_its_own() -> None:
    """Its top (projection, LIMIT) is the server's when sent as a query of its own."""
    query = algebra("SELECT * WHERE { ?x :q ?s { SELECT ?s WHERE { ?s :p ?o } LIMIT 1 } }")
    join = query.p.p
    subquery = join.p2 if join.p2.name == "ToMultiSet" else join.p1
    assert fragment.refusal(subquery) == "subquery"
    assert fragment.select_refusals(subquery.p) == []
    assert fragment.refusals(subquery.p) == ["subquery"]  # as a group pattern, LIMIT is not the server's


def test_a_filter_node_is_refused_for_its_expression() -> None:
    query = algebra("SELECT * WHERE { ?s :p ?o FILTER(?o < NOW()) }")
    node = query.p.p
    assert node.name == "Filter"
    assert fragment.refusal(node) is None  # FILTER itself is the server's
    assert fragment.refusals(node) == ["NOW"]
    assert fragment.refusals(node.p) == []
    assert fragment.refusal(node.expr) is None  # `<`
    assert fragment.refusals(node.expr) == ["NOW"]


def test_details_say_why() -> None:
    with pytest.raises(UnsupportedQuery, match="one default graph"):
        fragment.check(algebra(REFUSED["FROM"]))


def test_describe_without_a_pattern() -> None:
    """DESCRIBE <iri> has no WHERE clause: only the form is client-side."""
    assert fragment.query_refusals(parse("DESCRIBE <http://example.org/>").algebra.algebra) == ["DESCRIBE"]


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("SELECT ?s (COUNT(*) AS ?n) WHERE { ?s :p ?o } GROUP BY ?s HAVING (COUNT(*) > 2) ORDER BY DESC(?n)", []),
        ("SELECT ?s (COUNT(?o) AS ?n) (MIN(?o) AS ?lo) (SAMPLE(?o) AS ?any) WHERE { ?s :p ?o } GROUP BY ?s", []),
        ("SELECT * { { SELECT ?s (MAX(?o) AS ?m) { ?s :p ?o } GROUP BY ?s } ?s :q ?z FILTER(?z > ?m) }", []),
        ("SELECT DISTINCT ?o WHERE { ?s :p ?o } ORDER BY ?o LIMIT 3 OFFSET 2", []),
        ("SELECT ?s WHERE { { SELECT ?s { ?s :p ?o } ORDER BY ?o LIMIT 5 } FILTER NOT EXISTS { ?s :q 1 } }", []),
        ("SELECT (SUM(?o) AS ?t) (AVG(?o * 2) AS ?a) WHERE { ?s :p ?o }", []),
        ("SELECT (GROUP_CONCAT(?o) AS ?t) WHERE { ?s :p ?o }", ["GROUP_CONCAT"]),
        ("SELECT (SUM(DISTINCT ?o) AS ?t) WHERE { ?s :p ?o }", ["SUM"]),
        ("SELECT (COUNT(DISTINCT ?o) AS ?n) WHERE { ?s :p ?o }", ["COUNT"]),
        ("SELECT (COUNT(?z) AS ?n) WHERE { ?s :p ?o OPTIONAL { ?s :q ?z } }", ["COUNT"]),
        ("SELECT (COUNT(*) AS ?n) (COUNT(?o) AS ?m) WHERE { ?s :p ?o }", ["COUNT"]),
        # a key's expression is a BIND in the group's pattern (the parser's)
        ("SELECT ?k (COUNT(*) AS ?n) WHERE { ?s :p ?o } GROUP BY (STR(?o) AS ?k)", []),
        ("SELECT (COUNT(*) AS ?n) WHERE { ?s :p ?o } GROUP BY STR(?o)", []),
        ("SELECT * { { SELECT ?s { ?s :p ?o } LIMIT 2 } UNION { ?s :q ?o } }", ["subquery"]),
        ("SELECT * WHERE { ?s :p* ?o }", ["property path"]),
        ("ASK { { SELECT ?s (COUNT(*) AS ?n) { ?s :p ?o } GROUP BY ?s } FILTER(?n > 3) }", []),
        ("CONSTRUCT { ?s :p ?o } WHERE { ?s :p ?o }", ["CONSTRUCT"]),
    ],
)
def test_what_a_worker_runs_whole(query: str, refused: list[str]) -> None:
    """`whole_refusals`: besides the fragment, modifiers at any depth, subqueries joined with
    the rest, and GROUP BY of variables with one COUNT, MIN, MAX and SAMPLE."""
    assert fragment.whole_refusals(algebra(query)) == refused
