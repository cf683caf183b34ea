"""RDF graphs (the results of CONSTRUCT and DESCRIBE) in N-Triples and Turtle,
written from triples of dictionary-syntax terms.

Writers stream like the results writers: `head` once, `triples` for each
chunk as it comes, `end` once. The Turtle writer groups consecutive triples
of one subject (`;`) and of one subject and predicate (`,`), also across
chunks, and abbreviates IRIs under the prefixes it is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from quanta.sparql.terms import nt_term

GRAPH_FORMATS = {
    "nt": "application/n-triples",
    "ttl": "text/turtle",
}
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

Triple = tuple[str, str, str]  # subject, predicate, object in dictionary syntax

# A conservative PN_LOCAL: what needs no escape in a prefixed name.
_LOCAL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?|")
_PREFIX = re.compile(r"(?:[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?)?")


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
