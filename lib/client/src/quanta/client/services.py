"""SERVICE endpoints: what the caller allows a query to reach, and how.

The smart client never contacts an IRI a query names unless the caller's
allowlist maps it to a `ServiceEndpoint` (no server-side request forgery):
`services={"http://example.org/sparql": SparqlEndpoint("http://example.org/sparql")}`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import urllib3

from quanta.client.http import connection_pool
from quanta.client.transport import QueryError
from quanta.sparql.errors import ErrorKind
from quanta.sparql.reader import read_json
from quanta.sparql.term_rows import Row


class ServiceEndpoint(Protocol):
    async def select(self, query: str) -> tuple[list[str], list[Row]]:
        """Run a SELECT query to completion: its variables and rows. Raise
        QueryError(SERVICE_FAILED) when the endpoint fails."""
        ...


class SparqlEndpoint:
    """A standard SPARQL 1.1 Protocol endpoint over HTTP (POST, form-encoded;
    SPARQL JSON results)."""

    def __init__(self, url: str, *, timeout: float = 60.0, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        accept = {"Accept": "application/sparql-results+json"}
        self.http = connection_pool(url, {**accept, **(headers or {})}, timeout)

    async def select(self, query: str) -> tuple[list[str], list[Row]]:
        return await asyncio.to_thread(self._select, query)

    def _select(self, query: str) -> tuple[list[str], list[Row]]:
        try:
            response = self.http.request("POST", self.url, fields={"query": query}, encode_multipart=False)
        except urllib3.exceptions.HTTPError as error:
            raise QueryError(ErrorKind.SERVICE_FAILED, f"SERVICE <{self.url}>: {error}") from error
        if response.status != 200:
            text = response.data[:200].decode(errors="replace")
            raise QueryError(ErrorKind.SERVICE_FAILED, f"SERVICE <{self.url}>: HTTP {response.status} {text}")
        try:
            results = read_json(response.data)
        except (ValueError, KeyError) as error:
            raise QueryError(ErrorKind.SERVICE_FAILED, f"SERVICE <{self.url}>: unreadable results: {error}") from error
        return results.head, results.rows


class SmartClientEndpoint:
    """A dataset of a quanta service (through any transport), by a smart
    client of its own: the SERVICE pattern may use any SPARQL."""

    def __init__(self, client: Any, dataset: str) -> None:
        self.client = client  # quanta.client.smart.SmartClient (Any: no import cycle)
        self.dataset = dataset

    async def select(self, query: str) -> tuple[list[str], list[Row]]:
        execution = await self.client.prepare(query, self.dataset)
        try:
            rows = [row async for row in execution.solutions()]
        except QueryError as error:
            raise QueryError(ErrorKind.SERVICE_FAILED, f"SERVICE dataset {self.dataset}: {error}") from error
        finally:
            await execution.aclose()
        return list(execution.variables), rows
