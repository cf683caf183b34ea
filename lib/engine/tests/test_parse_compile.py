"""Compiling parsed queries: constants found in the data, and the server
fragment's boundary (everything outside it is refused, naming the operator)."""

from __future__ import annotations

import pytest

from quanta.engine.planning.compile import compile_query
from quanta.engine.storage import TripleStore
from quanta.sparql.errors import UnsupportedQuery
from quanta.testkit.engine import run_paged

EX = "PREFIX : <http://example.org/> "


def test_constants_with_escapes_round_trip(make_store) -> None:
    store: TripleStore = make_store('<http://a> <http://p> "q\\"uote\\\\d\\n" .\n<http://a> <http://p> <http://a> .\n')
    _, rows, _, _ = run_paged(store, 'SELECT ?s WHERE { ?s <http://p> "q\\"uote\\\\d\\n" }', None)
    assert rows == [("http://a",)]
    _, rows, _, _ = run_paged(store, "SELECT ?s WHERE { ?s <http://p> '''q\"uote\\\\d\n''' }", None)
    assert rows == [("http://a",)]


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
    "NOW": "SELECT * WHERE { ?s :p ?o BIND(NOW() AS ?t) }",
    "RAND": "SELECT * WHERE { ?s :p ?o FILTER(RAND() < 0.5) }",
    "CONSTRUCT": "CONSTRUCT { ?s :q ?o } WHERE { ?s :p ?o }",
    "DESCRIBE": "DESCRIBE ?s WHERE { ?s :p ?o }",
}


@pytest.mark.parametrize("operator", REFUSED)
def test_outside_the_fragment_is_refused_by_name(operator: str, watdiv_store: TripleStore) -> None:
    with pytest.raises(UnsupportedQuery) as error:
        compile_query(EX + REFUSED[operator], watdiv_store)
    assert error.value.operator.upper() == operator.upper(), str(error.value)
    assert "client" in str(error.value)


def test_reduced_and_sequence_paths_are_served(watdiv_store: TripleStore) -> None:
    """REDUCED may keep duplicates; sequence and inverse paths are chains of patterns."""
    w = "PREFIX w: <http://db.uwaterloo.ca/~galuc/wsdbm/> "
    reduced = run_paged(watdiv_store, w + "SELECT REDUCED ?s WHERE { ?s w:likes ?o }", None)[1]
    plain = run_paged(watdiv_store, w + "SELECT ?s WHERE { ?s w:likes ?o }", None)[1]
    assert reduced == plain
    path = run_paged(watdiv_store, w + "SELECT ?a ?c WHERE { ?c ^w:likes/^w:friendOf ?a }", 0.0005)[1]
    chain = run_paged(watdiv_store, w + "SELECT ?a ?c WHERE { ?b w:likes ?c . ?a w:friendOf ?b }", None)[1]
    assert sorted(path) == sorted(chain) and path
