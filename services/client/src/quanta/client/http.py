"""`HttpTransport`: one quantum per call over the gateway's `/v1` JSON protocol (docs/protocol.md).

urllib3 is synchronous: each request runs in a worker thread (asyncio.to_thread),
so the event loop of the caller never blocks on the network. Problems
(RFC 9457) become QueryError with the kind their `type` names.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import urllib3

from quanta.client.client import _pool, _problem, json_body
from quanta.client.transport import QueryError, SubPage, SubRequest
from quanta.sparql.errors import PROBLEM_BASE, ErrorKind
from quanta.sparql.reader import row_from_json


class HttpTransport:
    """The `/v1` protocol at `url` (e.g. http://127.0.0.1:8000). Thread-safe."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, plan: str | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Content-Type": "application/json"} | ({"X-API-Key": api_key} if api_key else {})
        self.http = _pool(self.url, headers, timeout)
        self.plan = plan  # "value" | "reference" | None (the dataset's default)

    def close(self) -> None:
        self.http.clear()

    async def run(self, request: SubRequest) -> SubPage:
        return await asyncio.to_thread(self.run_sync, request)

    def run_sync(self, request: SubRequest) -> SubPage:
        if request.render is not None or request.columns:  # /v1 answers rows: never an empty page instead
            raise QueryError(ErrorKind.INVALID_REQUEST, "the /v1 protocol returns rows, not pages rendered as text")
        body: dict[str, str | bool] = (
            {"query": request.query} if request.query is not None else {"next": request.next or ""}
        )
        if request.partial and request.query is not None:
            body["partial"] = True
        if request.graph is not None:
            body["graph"] = request.graph
        if self.plan:
            body["plan"] = self.plan
        try:
            response = self.http.request(
                "POST", f"{self.url}/v1/datasets/{request.dataset}/query", body=json.dumps(body).encode()
            )
        except urllib3.exceptions.HTTPError as error:  # refused, reset, timed out
            raise QueryError(ErrorKind.UNREACHABLE, f"{self.url}: {error}") from error
        if response.status != 200:
            raise problem_error(response.status, _problem(response), response.headers.get("Retry-After"))
        data = json_body(response)
        variables = list(data.get("head", {}).get("vars", []) or [])
        bindings = data.get("results", {}).get("bindings", [])
        return SubPage(
            variables=variables,
            rows=[row_from_json(variables, b) for b in bindings],
            next=data.get("next"),
            boolean=data.get("boolean"),
            stats=data.get("stats", {}),
            bytes=len(response.data),
        )

    def cardinalities(self, dataset: str, graph: str | None) -> None:
        return None  # the files are the server's

    async def named_graphs(self, dataset: str) -> list[str]:
        for entry in await asyncio.to_thread(self.datasets):
            if entry.get("name") == dataset:
                return [str(g) for g in entry.get("graphs", [])]
        raise QueryError(ErrorKind.UNKNOWN_DATASET, f"no dataset named {dataset!r} at {self.url}")

    def datasets(self) -> list[dict[str, Any]]:
        """`GET /v1/datasets`: each dataset's name, options and named graphs."""
        try:
            response = self.http.request("GET", f"{self.url}/v1/datasets")
        except urllib3.exceptions.HTTPError as error:
            raise QueryError(ErrorKind.UNREACHABLE, f"{self.url}: {error}") from error
        if response.status != 200:
            raise problem_error(response.status, _problem(response), None)
        return list(json_body(response)["datasets"])


def problem_error(status: int, problem: dict[str, Any], retry_after: str | None) -> QueryError:
    """A problem document as a QueryError (an unknown type: the status's kind, else internal)."""
    kind_type = str(problem.get("type", ""))
    if kind_type.startswith(PROBLEM_BASE):
        kind = ErrorKind.of(kind_type.removeprefix(PROBLEM_BASE))
    else:
        kind = next((k for k in ErrorKind if k.status == status), ErrorKind.INTERNAL)
    seconds = problem.get("retry_after", retry_after)
    try:
        retry_after_s = float(seconds) if seconds is not None else None
    except (TypeError, ValueError):
        retry_after_s = None
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    return QueryError(
        kind,
        detail,
        retry_after_s=retry_after_s,
        next=problem.get("next"),
        line=problem.get("line"),
        column=problem.get("column"),
        operator=problem.get("operator"),
    )
