"""rdflib is off the query path: no service imports it (nor pyparsing, its parser's base).

Queries are parsed natively (spargebra) and walked as `quanta.sparql.syntax`'s
tree; rdflib stays a test-only reference (root pyproject's dev group). Importing
it cost every process ~0.3 s.
"""

from __future__ import annotations

import subprocess
import sys

from quanta.sparql.parse import parse
from quanta.sparql.syntax import (
    AlgebraNode,
    BlankTerm,
    IriTerm,
    LiteralTerm,
    PathInverse,
    PathRepeat,
    PathSequence,
    Var,
)

ENTRY_POINTS = ["quanta.engine.cli", "quanta.gateway.main", "quanta.worker.cli", "quanta.client"]
XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"


def test_no_service_imports_rdflib_or_pyparsing() -> None:
    code = "\n".join(
        [
            "import sys",
            *(f"import {module}" for module in ENTRY_POINTS),
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rdflib', 'pyparsing')))",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_entry_points_exist() -> None:
    """The check above imports real modules (a renamed one would fail the import, not pass)."""
    code = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))"
    subprocess.run([sys.executable, "-c", code, *ENTRY_POINTS], timeout=60, check=True)


def test_literals_keep_their_lexical_form() -> None:
    """ "01"^^xsd:integer and "1"^^xsd:integer are different RDF terms (sameTerm, joins)."""
    one, zero_one = LiteralTerm("1", datatype=XSD_INTEGER), LiteralTerm("01", datatype=XSD_INTEGER)
    assert one != zero_one and hash(one) != hash(zero_one)
    assert one == LiteralTerm("1", datatype=XSD_INTEGER) and hash(one) == hash(LiteralTerm("1", datatype=XSD_INTEGER))
    assert LiteralTerm("1") != one, "a simple literal is not an integer"
    assert LiteralTerm("a", datatype="http://www.w3.org/2001/XMLSchema#string") == LiteralTerm("a")
    assert LiteralTerm("a", language="EN") == LiteralTerm("a", language="en") != LiteralTerm("a")


def test_terms_of_different_kinds_are_different() -> None:
    """Terms are str subclasses, but a variable is not the IRI or blank node of the same spelling,
    nor a plain str (VALUES rows mark a missing value with the str "UNDEF")."""
    kinds = [Var("x"), IriTerm("x"), BlankTerm("x"), LiteralTerm("x")]
    assert len(set(kinds)) == 4
    assert all(k != "x" and str(k) == "x" for k in kinds)
    assert IriTerm("UNDEF") != "UNDEF"


def test_a_node_reads_a_missing_part_as_none() -> None:
    node = AlgebraNode("Filter", expr=Var("x"))
    assert node.expr == node["expr"] == Var("x")
    assert node.p is None and node.get("p") is None
    assert node == AlgebraNode("Filter", expr=Var("x")) != AlgebraNode("Extend", expr=Var("x"))


def test_the_parser_builds_quanta_s_tree() -> None:
    algebra = parse("SELECT * WHERE { ?s (^<http://x/p>/<http://x/q>)+ 01 }").algebra.algebra
    ((s, path, o),) = algebra.p.p.triples
    assert isinstance(algebra, AlgebraNode) and algebra.name == "SelectQuery"
    assert s == Var("s") and o == LiteralTerm("01", datatype=XSD_INTEGER)
    assert path == PathRepeat(PathSequence(PathInverse(IriTerm("http://x/p")), IriTerm("http://x/q")), "+")
