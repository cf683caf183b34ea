"""RDF terms in the dictionary's string syntax, and their algebra (`quanta.sparql.syntax`) and N-Triples forms.

HDT dictionaries (as `quanta load` writes them, like hdt-cpp and hdt-java)
hold IRIs bare (`http://x`), literals as their raw lexical form in quotes
with a lowercase `@lang` or a `^^<datatype>` (never `^^xsd:string`), and
blank nodes as `_:label`. Every part of quanta passes terms in this syntax
(rows of results, a term table's terms); escaping happens only in output
syntaxes. The engine works on integer ids; strings only appear when a FILTER
needs a value or a result is written.
"""

from __future__ import annotations

import re

from quanta.sparql.syntax import BlankTerm, IriTerm, LiteralTerm, RdfTerm

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
# A blank node of the data named in query text (SPARQL has no syntax for one:
# `_:b` in a query is a variable). The smart client ships blank nodes it got
# from the server back as these IRIs (in VALUES, for bind joins); whoever
# reads a query turns them into the blank node `_:label` (`from_term`).
SKOLEM_PREFIX = "tag:quanta.dev,2026:bnode:"


_ESCAPE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')
_UNESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def escape_lexical(lexical: str) -> str:
    """N-Triples string escaping (for output syntaxes)."""
    if not _NEEDS_ESCAPE.search(lexical):
        return lexical
    return _NEEDS_ESCAPE.sub(lambda m: _ESCAPE.get(m.group(), f"\\u{ord(m.group()):04X}"), lexical)


_IRI_NEEDS_ESCAPE = re.compile(r'[\x00-\x20<>"{}|^`\\]')


def iri_ref(iri: str) -> str:
    """An IRI in N-Triples and Turtle syntax: `<iri>`, with the characters
    IRIREF does not allow written as \\u escapes."""
    if _IRI_NEEDS_ESCAPE.search(iri):
        iri = _IRI_NEEDS_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04X}", iri)
    return f"<{iri}>"


def nt_term(term: str) -> str:
    """A term in N-Triples syntax (also Turtle's, and TSV results' cells)."""
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        quoted = f'"{escape_lexical(lexical)}"'
        return f"{quoted}@{lang}" if lang else f"{quoted}^^{iri_ref(datatype)}" if datatype else quoted
    return term if term.startswith("_:") else iri_ref(term)


def literal(lexical: str, lang: str | None = None, datatype: str | None = None) -> str:
    """A literal in dictionary syntax (language tag lowercased, xsd:string left implicit)."""
    if lang:
        return f'"{lexical}"@{lang.lower()}'
    if datatype and datatype != XSD_STRING:
        return f'"{lexical}"^^<{datatype}>'
    return f'"{lexical}"'


def unescape_lexical(text: str) -> str:
    if "\\" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        code = match.group(1) or match.group(2)
        return chr(int(code, 16)) if code else _ECHAR.get(match.group(3), match.group(0))

    return _UNESCAPE.sub(one, text)


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


def to_term(term: str) -> RdfTerm:
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        return LiteralTerm(lexical, lang, datatype)
    if term.startswith("_:"):
        return BlankTerm(term[2:])
    return IriTerm(term)


def from_term(node: RdfTerm) -> str:
    if isinstance(node, LiteralTerm):
        return literal(str(node), node.language, str(node.datatype) if node.datatype is not None else None)
    if isinstance(node, BlankTerm):
        return f"_:{node}"
    text = str(node)
    return "_:" + text[len(SKOLEM_PREFIX) :] if text.startswith(SKOLEM_PREFIX) else text


def skolem(term: str) -> str:
    """A blank node `_:label` as the IRI that names it in query text (see SKOLEM_PREFIX)."""
    return SKOLEM_PREFIX + term[2:]


def spellings(term: str) -> tuple[str, ...]:
    """Dictionary spellings that denote `term`: a simple literal may be stored
    with or without an explicit ^^xsd:string."""
    if term.startswith('"') and term.endswith('"'):
        return term, f"{term}^^<{XSD_STRING}>"
    if term.endswith(f"^^<{XSD_STRING}>"):
        return term, term[: -len(XSD_STRING) - 4]
    return (term,)
