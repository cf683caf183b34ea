"""The gateway's `/v1` JSON protocol over HTTP (docs/protocol.md): the clients' one HTTP client of it.

- `HttpTransport`: one quantum per call, the smart client's transport. It never retries:
  a problem (RFC 9457) becomes a `ServiceError`, a QueryError of the kind its `type` names.
- `QuantaClient`: the low-level client for the server fragment. It runs a query to its end
  over an `HttpTransport`, following each page's `next` and retrying what the smart client
  retries, as `Retry` (quanta.client.requester) says: 429 and 503 after their Retry-After,
  a 504 from its `next`, a gateway that does not answer for a few seconds.

HTTP goes through urllib3 (kept-alive connections, TLS): a page costs it half the CPU httpx
takes, which matters at one request per quantum. urllib3 is synchronous: `HttpTransport.run`
sends from a worker thread (asyncio.to_thread), so the caller's event loop never blocks.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import orjson
import urllib3

from quanta.client.requester import DEFAULT_RETRY
from quanta.client.transport import QueryError, SubPage, SubRequest
from quanta.sparql.collector import collection_paused
from quanta.sparql.errors import PROBLEM_BASE, ErrorKind
from quanta.sparql.reader import row_from_json


class ServiceError(QueryError):
    """The service answered a problem document: its HTTP `status` and body `problem`, read
    into a QueryError (the kind its `type` names; an unknown type: the status's kind, else
    internal)."""

    def __init__(self, status: int, problem: dict[str, Any], retry_after: str | None = None) -> None:
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
        super().__init__(
            kind,
            str(problem.get("detail") or problem.get("title") or f"HTTP {status}"),
            retry_after_s=retry_after_s,
            next=problem.get("next"),
            line=problem.get("line"),
            column=problem.get("column"),
            operator=problem.get("operator"),
        )
        self.status = status
        self.problem = problem


class HttpTransport:
    """The `/v1` protocol at `url` (e.g. http://127.0.0.1:8000). Thread-safe."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, plan: str | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Content-Type": "application/json"} | ({"X-API-Key": api_key} if api_key else {})
        self.http = connection_pool(self.url, headers, timeout)
        self.plan = plan  # "value" | "reference" | None (the dataset's default)

    def close(self) -> None:
        self.http.clear()

    async def run(self, request: SubRequest) -> SubPage:
        return await asyncio.to_thread(self.run_sync, request)

    def run_sync(self, request: SubRequest) -> SubPage:
        data, size = self.fetch(request)
        variables = list(data.get("head", {}).get("vars", []) or [])
        bindings = data.get("results", {}).get("bindings", [])
        return SubPage(
            variables=variables,
            rows=[row_from_json(variables, b) for b in bindings],
            next=data.get("next"),
            boolean=data.get("boolean"),
            stats=data.get("stats", {}),
            bytes=size,
        )

    def fetch(self, request: SubRequest, plan: str | None = None) -> tuple[dict[str, Any], int]:
        """One quantum: the page's JSON as the server wrote it, and its size in bytes. `plan`
        ("value", "reference") for this request, else the transport's."""
        if request.render is not None or request.columns:  # /v1 answers rows: never an empty page instead
            raise QueryError(ErrorKind.INVALID_REQUEST, "the /v1 protocol returns rows, not pages rendered as text")
        body: dict[str, str | bool] = (
            {"query": request.query} if request.query is not None else {"next": request.next or ""}
        )
        if request.partial and request.query is not None:
            body["partial"] = True
        if request.whole and request.query is not None:
            body["whole"] = True
        if request.graph is not None:
            body["graph"] = request.graph
        mode = plan or self.plan
        if mode:
            body["plan"] = mode
        response = self._request("POST", f"/v1/datasets/{request.dataset}/query", json.dumps(body).encode())
        return json_body(response), len(response.data)

    def cardinalities(self, dataset: str, graph: str | None) -> None:
        return None  # the files are the server's

    async def named_graphs(self, dataset: str) -> list[str]:
        for entry in await asyncio.to_thread(self.datasets):
            if entry.get("name") == dataset:
                return [str(g) for g in entry.get("graphs", [])]
        raise QueryError(ErrorKind.UNKNOWN_DATASET, f"no dataset named {dataset!r} at {self.url}")

    def datasets(self) -> list[dict[str, Any]]:
        """`GET /v1/datasets`: each dataset's name, options and named graphs."""
        return list(json_body(self._request("GET", "/v1/datasets"))["datasets"])

    def _request(self, method: str, path: str, body: bytes | None = None) -> urllib3.BaseHTTPResponse:
        """The 200 answer; else ServiceError, or QueryError(UNREACHABLE) when no answer came."""
        try:
            response = self.http.request(method, f"{self.url}{path}", body=body)
        except urllib3.exceptions.HTTPError as error:  # refused, reset, timed out
            raise QueryError(ErrorKind.UNREACHABLE, f"{self.url}: {error}") from error
        if response.status != 200:
            raise ServiceError(response.status, _problem(response), response.headers.get("Retry-After"))
        return response


@dataclass
class Page:
    """One page of QuantaClient's, as the server wrote it (SPARQL JSON)."""

    head: list[str]
    bindings: list[dict[str, dict[str, str]]]
    next: str | None
    stats: dict[str, Any] = field(default_factory=dict)
    boolean: bool | None = None


class QuantaClient:
    """Queries of the server fragment, each run to its end: pages as the server wrote them
    (SPARQL JSON bindings, not read into terms). Retries as the smart client's default
    `Retry`, with at most `max_retries` resends a page. One client per thread."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, max_retries: int = 10) -> None:
        self.transport = HttpTransport(url, api_key=api_key, timeout=timeout)
        self.url = self.transport.url
        self.retry = replace(
            DEFAULT_RETRY,
            attempts=max_retries,
            unreachable_attempts=min(max_retries, DEFAULT_RETRY.unreachable_attempts),
        )
        self.requests = 0  # sent, retries included

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> QuantaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pages(self, dataset: str, query: str, *, plan: str | None = None) -> Iterator[Page]:
        """Every page of one query, in order."""
        request = SubRequest(dataset, query=query)
        while True:
            page = self._page(request, plan)
            yield page
            if page.next is None:
                return
            request = request.resumed(page.next)

    def query(self, dataset: str, query: str, *, plan: str | None = None) -> Iterator[dict[str, dict[str, str]]]:
        """The solutions of a query, streamed page by page."""
        for page in self.pages(dataset, query, plan=plan):
            yield from page.bindings

    def ask(self, dataset: str, query: str) -> bool:
        pages = list(self.pages(dataset, query))
        return bool(pages[-1].boolean)

    def datasets(self) -> list[dict[str, Any]]:
        return self.transport.datasets()

    def _page(self, request: SubRequest, plan: str | None) -> Page:
        attempt = 0
        while True:
            self.requests += 1
            try:
                data, _ = self.transport.fetch(request, plan)
            except QueryError as error:
                request, wait = self.retry.again(attempt, error, request)
                time.sleep(wait)
                attempt += 1
                continue
            return Page(
                head=data.get("head", {}).get("vars", []),
                bindings=data.get("results", {}).get("bindings", []),
                next=data.get("next"),
                stats=data.get("stats", {}),
                boolean=data.get("boolean"),
            )


def connection_pool(url: str, headers: dict[str, str], timeout: float) -> urllib3.PoolManager:
    """Connections to `url`, through the proxy the environment names for it (HTTP_PROXY,
    HTTPS_PROXY, NO_PROXY), if any. retries=False: the caller decides what to retry."""
    options: dict[str, Any] = {"headers": headers, "timeout": urllib3.Timeout(total=timeout), "retries": False}
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return urllib3.ProxyManager(proxy, **options)
    return urllib3.PoolManager(**options)


def json_body(response: urllib3.BaseHTTPResponse) -> Any:
    """A response's JSON (orjson, the cyclic collector paused: a 1 MiB page of bindings in about
    3 ms, where json took 13). A body that is not JSON raises ValueError, as json's would."""
    with collection_paused():
        return orjson.loads(response.data)


def _problem(response: urllib3.BaseHTTPResponse) -> dict[str, Any]:
    try:
        data = json_body(response)
        return data if isinstance(data, dict) else {"detail": str(data)}
    except ValueError:
        return {"title": response.reason or "", "detail": response.data[:200].decode(errors="replace")}
