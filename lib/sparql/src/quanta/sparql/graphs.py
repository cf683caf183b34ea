"""RDF graphs (the results of CONSTRUCT and DESCRIBE) in N-Triples, Turtle,
RDF/XML and JSON-LD, written from triples of dictionary-syntax terms.

Writers stream like the results writers: `head` once, `triples` for each
chunk as it comes, `end` once. The Turtle writer groups consecutive triples
of one subject (`;`) and of one subject and predicate (`,`), also across
chunks, and abbreviates IRIs under the prefixes it is given. RDF/XML and
JSON-LD (expanded form) write one node per run of triples of one subject;
RDF/XML declares each predicate's namespace on its own element, so nothing
needs to be known before the first triple.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from quanta.sparql.terms import nt_term, split_literal
from quanta.sparql.xml_text import escape, quoteattr

GRAPH_FORMATS = {
    "nt": "application/n-triples",
    "ttl": "text/turtle",
    "rdfxml": "application/rdf+xml",
    "jsonld": "application/ld+json",
}
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

Triple = tuple[str, str, str]  # subject, predicate, object in dictionary syntax

# A conservative PN_LOCAL: what needs no escape in a prefixed name.
_LOCAL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?|")
_PREFIX = re.compile(r"(?:[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?)?")
# The XML name an RDF/XML property element needs: the longest NCName ending the IRI.
_XML_LOCAL = re.compile(r"[^\W\d][\w.-]*$")


class GraphWriter(Protocol):
    media_type: str

    def head(self) -> str:
        """The document before the first triple."""
        ...

    def triples(self, triples: Iterable[Triple]) -> str:
        """The next triples."""
        ...

    def end(self) -> str:
        """The rest of the document."""
        ...


def graph_writer(fmt: str, prefixes: Mapping[str, str] | None = None) -> GraphWriter:
    """A new writer (Turtle keeps state: use one per document); `prefixes`
    (name -> namespace IRI) abbreviate IRIs in Turtle."""
    if fmt == "nt":
        return NTriples()
    if fmt == "ttl":
        return Turtle(prefixes or {})
    if fmt == "rdfxml":
        return RdfXml()
    if fmt == "jsonld":
        return JsonLd()
    raise ValueError(f"unknown graph format {fmt!r}; choose from {', '.join(GRAPH_FORMATS)}")


def write_graph(fmt: str, triples: Iterable[Triple], prefixes: Mapping[str, str] | None = None) -> str:
    """The whole document."""
    out = graph_writer(fmt, prefixes)
    return out.head() + out.triples(triples) + out.end()


class NTriples:
    media_type = GRAPH_FORMATS["nt"]

    def head(self) -> str:
        return ""

    def triples(self, triples: Iterable[Triple]) -> str:
        return "".join(f"{nt_term(s)} {nt_term(p)} {nt_term(o)} .\n" for s, p, o in triples)

    def end(self) -> str:
        return ""


class Turtle:
    media_type = GRAPH_FORMATS["ttl"]

    def __init__(self, prefixes: Mapping[str, str]) -> None:
        bad = [name for name in prefixes if not _PREFIX.fullmatch(name)]
        if bad:
            raise ValueError(f"not Turtle prefix names: {bad}")
        # longest namespace first: the most specific abbreviation wins
        self.prefixes = sorted(prefixes.items(), key=lambda item: -len(item[1]))
        self._subject: str | None = None
        self._predicate: str | None = None

    def head(self) -> str:
        return "".join(f"@prefix {name}: {nt_term(iri)} .\n" for name, iri in self.prefixes)

    def term(self, term: str) -> str:
        """A term in Turtle: a prefixed name where a prefix allows, else as in N-Triples."""
        if term.startswith(('"', "_:")):
            return nt_term(term)
        for name, namespace in self.prefixes:
            if term.startswith(namespace) and _LOCAL.fullmatch(local := term[len(namespace) :]):
                return f"{name}:{local}"
        return nt_term(term)

    def triples(self, triples: Iterable[Triple]) -> str:
        out = []
        for s, p, o in triples:
            if s == self._subject and p == self._predicate:
                out.append(f" ,\n        {self.term(o)}")
                continue
            predicate = "a" if p == RDF_TYPE else self.term(p)
            if s == self._subject:
                out.append(f" ;\n    {predicate} {self.term(o)}")
            else:
                if self._subject is not None:
                    out.append(" .\n")
                out.append(f"{self.term(s)} {predicate} {self.term(o)}")
            self._subject, self._predicate = s, p
        return "".join(out)

    def end(self) -> str:
        return " .\n" if self._subject is not None else ""


class RdfXml:
    media_type = GRAPH_FORMATS["rdfxml"]
    _START = (
        '<?xml version="1.0" encoding="utf-8"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
    )

    def __init__(self) -> None:
        self._subject: str | None = None

    def head(self) -> str:
        return self._START

    def triples(self, triples: Iterable[Triple]) -> str:
        out = []
        for s, p, o in triples:
            if s != self._subject:
                if self._subject is not None:
                    out.append("</rdf:Description>\n")
                node = f"rdf:nodeID={quoteattr(s[2:])}" if s.startswith("_:") else f"rdf:about={quoteattr(s)}"
                out.append(f"<rdf:Description {node}>\n")
                self._subject = s
            out.append(self._property(p, o))
        return "".join(out)

    @staticmethod
    def _property(predicate: str, obj: str) -> str:
        local = _XML_LOCAL.search(predicate)
        if local is None or local.start() == 0:
            raise ValueError(f"RDF/XML cannot write the predicate <{predicate}>: it does not end with an XML name")
        name = f"p:{local.group()} xmlns:p={quoteattr(predicate[: local.start()])}"
        if obj.startswith("_:"):
            return f"  <{name} rdf:nodeID={quoteattr(obj[2:])}/>\n"
        if not obj.startswith('"'):
            return f"  <{name} rdf:resource={quoteattr(obj)}/>\n"
        lexical, lang, datatype = split_literal(obj)
        attr = f" xml:lang={quoteattr(lang)}" if lang else f" rdf:datatype={quoteattr(datatype)}" if datatype else ""
        return f"  <{name}{attr}>{escape(lexical, {chr(13): '&#13;'})}</p:{local.group()}>\n"

    def end(self) -> str:
        return ("</rdf:Description>\n" if self._subject is not None else "") + "</rdf:RDF>\n"


def _jsonld_object(term: str) -> dict[str, str]:
    if not term.startswith('"'):
        return {"@id": term}
    lexical, lang, datatype = split_literal(term)
    if lang:
        return {"@value": lexical, "@language": lang}
    return {"@value": lexical, "@type": datatype} if datatype else {"@value": lexical}


class JsonLd:
    """Expanded JSON-LD: an array of node objects, one per run of triples of one
    subject (a subject may come back in a later node: JSON-LD merges them)."""

    media_type = GRAPH_FORMATS["jsonld"]

    def __init__(self) -> None:
        self._subject: str | None = None
        self._properties: dict[str, list[dict[str, str]]] = {}
        self._first = True

    def head(self) -> str:
        return "["

    def triples(self, triples: Iterable[Triple]) -> str:
        out = []
        for s, p, o in triples:
            if s != self._subject:
                out.append(self._node())
                self._subject = s
            self._properties.setdefault(p, []).append(_jsonld_object(o))
        return "".join(out)

    def _node(self) -> str:
        """The node object of the subject in hand ("" if none), and forget it."""
        if self._subject is None:
            return ""
        node = json.dumps({"@id": self._subject, **self._properties}, ensure_ascii=False)
        self._subject, self._properties = None, {}
        separator = "" if self._first else ",\n"
        self._first = False
        return separator + node

    def end(self) -> str:
        return self._node() + "]\n"
