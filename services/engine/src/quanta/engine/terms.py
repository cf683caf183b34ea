"""RDF terms in the dictionary's string syntax, and their rdflib and SPARQL-results forms.

HDT dictionaries hold IRIs bare (`http://x`), literals quoted with an optional
`@lang` or `^^<datatype>` suffix and no escaping inside the quotes, and blank
nodes as `_:label`. The engine works on integer ids; strings only appear when
a FILTER needs a value or a result is written out.
"""

from __future__ import annotations

import rdflib
from rdflib.term import BNode, Literal, Node, URIRef

# Keep lexical forms as written: "01"^^xsd:integer and "1"^^xsd:integer are
# different RDF terms, and sameTerm and joins must see them as different.
rdflib.NORMALIZE_LITERALS = False

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


def split_literal(term: str) -> tuple[str, str | None, str | None]:
    """'"abc"@en' -> ('abc', 'en', None); '"1"^^<dt>' -> ('1', None, 'dt')."""
    end = term.rfind('"')
    lexical = term[1:end]
    rest = term[end + 1 :]
    if rest.startswith("@"):
        return lexical, rest[1:], None
    if rest.startswith("^^<"):
        datatype = rest[3:-1]
        return lexical, None, None if datatype == XSD_STRING else datatype
    return lexical, None, None


def to_rdflib(term: str) -> Node:
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        return Literal(lexical, lang=lang, datatype=URIRef(datatype) if datatype else None)
    if term.startswith("_:"):
        return BNode(term[2:])
    return URIRef(term)


def from_rdflib(node: Node) -> str:
    if isinstance(node, Literal):
        lexical = str(node)
        if node.language:
            return f'"{lexical}"@{node.language}'
        if node.datatype is not None and str(node.datatype) != XSD_STRING:
            return f'"{lexical}"^^<{node.datatype}>'
        return f'"{lexical}"'
    if isinstance(node, BNode):
        return f"_:{node}"
    return str(node)


def spellings(term: str) -> tuple[str, ...]:
    """Dictionary spellings that denote `term`: a simple literal may be stored
    with or without an explicit ^^xsd:string."""
    if term.startswith('"') and term.endswith('"'):
        return term, f"{term}^^<{XSD_STRING}>"
    if term.endswith(f"^^<{XSD_STRING}>"):
        return term, term[: -len(XSD_STRING) - 4]
    return (term,)
