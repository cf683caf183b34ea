"""The client's view of a parsed query: rdflib's algebra with the query's own constants.

`quanta.sparql.parse` caches the algebra per query shape, with IRIs and
strings replaced by placeholders; the planner wants the constants
themselves, so the algebra is copied with them put back (the cached tree is
never modified). The copy also translates what rdflib leaves as parse trees:
EXISTS outside FILTER and BIND, and SERVICE patterns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rdflib.paths import AlternativePath, InvPath, MulPath, NegatedPath, Path, SequencePath
from rdflib.plugins.sparql.algebra import translateGroupGraphPattern
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Literal, Node, URIRef, Variable

from quanta.client.plan.algebra import copy_node
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind, QuantaError, QuerySyntaxError, QueryTooComplex, UnsupportedQuery
from quanta.sparql.parse import PLACEHOLDER_IRI, PLACEHOLDER_STRING, ParsedQuery, bounded_async, read
from quanta.sparql.terms import escape_lexical, iri_ref

_PLACEHOLDER = re.compile(rf'<{re.escape(PLACEHOLDER_IRI)}\d+>|"{re.escape(PLACEHOLDER_STRING)}\d+"')
_VARIABLE = re.compile(r"[?$]([A-Za-z0-9_\u00B7\u00C0-\uFFFF]+)")
_SELECT = re.compile(r"(?<![\w:?$])SELECT\b", re.IGNORECASE)
_STAR = re.compile(r"SELECT\s+(?:(?:DISTINCT|REDUCED)\s+)?\*", re.IGNORECASE)
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|<[^<>\s]*>|#[^\n]*')


@dataclass(frozen=True, slots=True)
class Query:
    algebra: Any  # the query form's node: SelectQuery, AskQuery, ConstructQuery, DescribeQuery
    base: str | None
    prologue: str  # PREFIX and BASE declarations, for text sent to SERVICE endpoints
    star: bool  # the top-level SELECT is `SELECT *`
    order: dict[str, int]  # variable name -> position of its first occurrence in the text


async def parse_query(text: str) -> Query:
    """Parse within `quanta.sparql.bounds`, on a parse thread (the event loop runs
    meanwhile); a syntax error is a QueryError with its line and column."""
    try:
        return await bounded_async(lambda: _query(text), text)
    except QuantaError as error:
        raise query_error(error) from error


def query_error(error: QuantaError) -> QueryError:
    """An engine error as the client reports it, with the members it names: a syntax error's
    position, the operator the server refuses, the limit a query is past."""
    if isinstance(error, QuerySyntaxError):
        return QueryError(ErrorKind.SYNTAX_ERROR, error.message, line=error.line, column=error.column)
    if isinstance(error, UnsupportedQuery):
        return QueryError(error.kind, str(error), operator=error.operator)
    return QueryError(error.kind, str(error), limit=error.limit if isinstance(error, QueryTooComplex) else None)


def _query(text: str) -> Query:
    parsed = read(text)
    source = parsed.algebra
    prologue = source.prologue
    algebra = _Resolver(parsed).walk(source.algebra)
    code = _STRINGS_AND_COMMENTS.sub(" ", text)
    first_select = _SELECT.search(code)
    star = first_select is not None and _STAR.match(code, first_select.start()) is not None
    order: dict[str, int] = {}
    for match in _VARIABLE.finditer(code):
        order.setdefault(match.group(1), len(order))
    return Query(algebra, prologue.base, _declarations(prologue), star, order)


@lru_cache(maxsize=2048)
def _declarations(prologue: Any) -> str:
    """PREFIX and BASE declarations of a parsed shape's prologue (the parse cache
    shares it between queries of one shape; rdflib lists ~30 default prefixes)."""
    declarations = [f"PREFIX {p}: <{ns}>" for p, ns in prologue.namespace_manager.namespaces()]
    if prologue.base:
        declarations.insert(0, f"BASE <{prologue.base}>")
    return "\n".join(declarations)


class _Resolver:
    def __init__(self, parsed: ParsedQuery) -> None:
        self.parsed = parsed

    def walk(self, value: Any) -> Any:
        if isinstance(value, CompValue):
            return self.node(value)
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.walk(v) for v in value)
        if isinstance(value, dict):
            return {self.walk(k): self.walk(v) for k, v in value.items()}
        if isinstance(value, Path):
            return self.path(value)
        if isinstance(value, URIRef | Literal) and not isinstance(value, Variable):
            return self.parsed.constant(value)
        return value

    def node(self, node: CompValue) -> CompValue:
        members = {key: value for key, value in node.items() if key != "_vars"}
        # rdflib keeps a translated EXISTS pattern as an attribute over the item
        # (whose parse tree it has emptied of FILTERs): the attribute is the pattern
        members.update({key: value for key, value in node.__dict__.items() if key in members})
        changes = {key: self.walk(value) for key, value in members.items()}
        name = node.name
        if name in ("Builtin_EXISTS", "Builtin_NOTEXISTS", "ServiceGraphPattern"):
            graph = changes.get("graph")
            if isinstance(graph, CompValue) and graph.name.startswith("GroupGraphPattern"):
                changes["graph"] = translateGroupGraphPattern(graph)
        if name == "ServiceGraphPattern":
            changes["service_string"] = self.text(str(node.service_string))
        return copy_node(node, **changes)

    def path(self, path: Path) -> Path:
        if isinstance(path, InvPath):
            return InvPath(self.walk(path.arg))
        if isinstance(path, SequencePath):
            return SequencePath(*[self.walk(a) for a in path.args])
        if isinstance(path, AlternativePath):
            return AlternativePath(*[self.walk(a) for a in path.args])
        if isinstance(path, MulPath):
            return MulPath(self.walk(path.path), path.mod)
        if isinstance(path, NegatedPath):
            negated = NegatedPath(URIRef("urn:x"))
            negated.args = [
                InvPath(self.walk(a.part)) if isinstance(a, CompValue) and a.name == "InversePath" else self.walk(a)
                for a in path.args
            ]
            return negated
        return path

    def text(self, text: str) -> str:
        """Query text with its placeholders replaced by the constants."""

        def one(match: re.Match[str]) -> str:
            token = match.group()
            if token.startswith("<"):
                return iri_ref(self.parsed.constants[token[1:-1]])
            return '"' + escape_lexical(self.parsed.constants[token[1:-1]]) + '"'

        return _PLACEHOLDER.sub(one, text)


def constant_node(node: Node) -> bool:
    """A constant term (not a variable, not a path)."""
    return isinstance(node, URIRef | Literal) and not isinstance(node, Variable)
