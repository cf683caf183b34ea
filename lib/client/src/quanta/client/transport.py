"""The smart client's view of a quanta service: one quantum of a server-fragment query per call.

A `Transport` runs one `SubRequest` (a query text or a `next` token, on a
dataset's default graph or one of its named graphs) and returns a `SubPage`,
or raises `QueryError`. `HttpTransport` (quanta.client.http) speaks the `/v1`
JSON protocol; the gateway has one over its dispatcher (no HTTP). Retrying
what may succeed later is the caller's (`quanta.client.requester`): a
transport reports, it never waits.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from quanta.sparql.errors import ErrorKind
from quanta.sparql.term_rows import Row

"""One dictionary-syntax term per variable (quanta.sparql.terms); None = unbound."""


@dataclass(frozen=True, slots=True)
class SubRequest:
    """One quantum of a server-fragment query: start `query`, or continue from `next`."""

    dataset: str
    graph: str | None = None  # None: the dataset's default graph; else a named graph's IRI
    query: str | None = None
    next: str | None = None
    # The page's rows written by the server in this results format (SubPage.text),
    # with these columns, rather than as rows: a transport that can (the gateway's).
    render: str | None = None
    columns: tuple[str, ...] = ()
    # A DISTINCT, or GROUP BY with COUNT(*), answered per quantum: each page's rows
    # distinct (with their counts) in that page alone, for the caller to merge
    partial: bool = False
    # The whole query, every operator on the server (suspended and resumed as any query), or the
    # error "unfinished" when the server cannot run it whole
    whole: bool = False

    def __post_init__(self) -> None:
        if (self.query is None) == (self.next is None):
            raise ValueError("a SubRequest has exactly one of `query` and `next`")

    def resumed(self, token: str) -> SubRequest:
        """The request that continues this one from `token`."""
        return SubRequest(self.dataset, self.graph, None, token, self.render, self.columns, self.partial, self.whole)


@dataclass(frozen=True, slots=True)
class SubPage:
    """The results of one quantum. `next` is None on the last page; an ASK's
    `boolean` is set on its last page (its rows are empty)."""

    variables: list[str]
    rows: list[Row]
    next: str | None
    boolean: bool | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    bytes: int = 0  # transferred for this page (response body; 0 if the transport cannot tell)
    # SubRequest.render: the rows as that results format writes them after its
    # head (quanta.sparql.results.rows_text; JSON: the "bindings" array)
    text: builtins.bytes = b""


class QueryError(Exception):
    """A request, or a whole query, failed. `kind` says how (its `retryable`
    tells "send the same request again after `retry_after_s`" from "failed");
    `next`, when set, is what to send instead of the failed request's input
    (a reply timeout hands back the state to resume from)."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retry_after_s: float | None = None,
        next: str | None = None,
        line: int | None = None,
        column: int | None = None,
        operator: str | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s
        self.next = next
        self.line = line
        self.column = column
        self.operator = operator
        self.limit = limit  # the setting a refused query is past (query-too-complex)

    def __str__(self) -> str:
        where = f" (line {self.line}, column {self.column})" if self.line else ""
        return f"{self.kind.slug}: {self.message}{where}"


class Cardinalities(Protocol):
    """What a dataset's file says of its own patterns' sizes (exact HDT counts), for the
    planner's choices (`quanta.engine.storage.TripleStore` has these)."""

    def locate(self, term: str) -> int:
        """The global id of a term (dictionary syntax), 0 if the file lacks it."""
        ...

    def estimate(self, s: int, p: int, o: int) -> int:
        """How many triples match (0 = any)."""
        ...

    def distinct_subjects(self, p: int) -> int:
        """How many distinct subjects have predicate `p`."""
        ...


class Transport(Protocol):
    async def run(self, request: SubRequest) -> SubPage:
        """Run one quantum; raise QueryError on any failure (never retry)."""
        ...

    def cardinalities(self, dataset: str, graph: str | None) -> Cardinalities | None:
        """The file of a dataset's graph when this process can read it (the gateway, a local
        client), else None: the planner then chooses without its counts."""
        ...

    async def named_graphs(self, dataset: str) -> list[str]:
        """The IRIs of the dataset's named graphs (GRAPH ?g ranges over them);
        QueryError(UNKNOWN_DATASET) if there is no such dataset."""
        ...
