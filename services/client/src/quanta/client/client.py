"""Run a query to completion against a quanta gateway: send it, then send
back each page's `next` until there is none. Overload answers (429, 503)
are retried after their Retry-After; a 504 carries a `next` that resumes
from the last saved state, so nothing is lost or repeated."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
import urllib3
from urllib3.exceptions import HTTPError as TransportError  # refused, reset, timed out

from quanta.sparql.collector import collection_paused

__all__ = ["QuantaClient", "ServiceError", "TransportError"]

RETRYABLE = {429, 503}
TRANSPORT_RETRIES = 5  # ~3 s of backoff: enough for a gateway restart, not to hang on a wrong URL


class ServiceError(Exception):
    """A problem the client cannot retry (RFC 9457 body in `problem`)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}".strip())
        self.status = status
        self.problem = problem


@dataclass
class Page:
    head: list[str]
    bindings: list[dict[str, dict[str, str]]]
    next: str | None
    stats: dict[str, Any] = field(default_factory=dict)
    boolean: bool | None = None


class QuantaClient:
    """One client per thread. HTTP goes through urllib3 (kept-alive connections, TLS):
    a page costs it half the CPU httpx takes, which matters at one request per quantum."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 60.0, max_retries: int = 10) -> None:
        self.url = url.rstrip("/")
        headers = {"Content-Type": "application/json"} | ({"X-API-Key": api_key} if api_key else {})
        self.http = _pool(self.url, headers, timeout)
        self.max_retries = max_retries
        self.requests = 0

    def close(self) -> None:
        self.http.clear()

    def __enter__(self) -> QuantaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pages(self, dataset: str, query: str, *, plan: str | None = None) -> Iterator[Page]:
        """Every page of one query, in order."""
        body: dict[str, str] = {"query": query}
        while True:
            if plan:
                body["plan"] = plan
            page = self._post(dataset, body)
            yield page
            if page.next is None:
                return
            body = {"next": page.next}

    def query(self, dataset: str, query: str, *, plan: str | None = None) -> Iterator[dict[str, dict[str, str]]]:
        """The solutions of a query, streamed page by page."""
        for page in self.pages(dataset, query, plan=plan):
            yield from page.bindings

    def ask(self, dataset: str, query: str) -> bool:
        pages = list(self.pages(dataset, query))
        return bool(pages[-1].boolean)

    def datasets(self) -> list[dict[str, Any]]:
        response = self.http.request("GET", f"{self.url}/v1/datasets")
        if response.status != 200:
            raise ServiceError(response.status, _problem(response))
        return list(json_body(response)["datasets"])

    def _post(self, dataset: str, body: dict[str, str]) -> Page:
        for attempt in range(self.max_retries + 1):
            self.requests += 1
            try:
                response = self.http.request(
                    "POST", f"{self.url}/v1/datasets/{dataset}/query", body=json.dumps(body).encode()
                )
            except TransportError:
                if attempt >= min(self.max_retries, TRANSPORT_RETRIES):
                    raise  # the gateway itself is gone, not just busy
                time.sleep(min(0.1 * 2**attempt, 5.0))
                continue
            if response.status == 200:
                data = json_body(response)
                return Page(
                    head=data.get("head", {}).get("vars", []),
                    bindings=data.get("results", {}).get("bindings", []),
                    next=data.get("next"),
                    stats=data.get("stats", {}),
                    boolean=data.get("boolean"),
                )
            problem = _problem(response)
            if response.status == 504 and problem.get("next"):
                body = {"next": problem["next"]}  # resume from the last saved state
                continue
            if response.status in RETRYABLE and attempt < self.max_retries:
                time.sleep(_retry_after(response, attempt))
                continue
            raise ServiceError(response.status, problem)
        raise ServiceError(503, {"title": "gave up", "detail": f"after {self.max_retries} retries"})


def _pool(url: str, headers: dict[str, str], timeout: float) -> urllib3.PoolManager:
    """Connections to `url`, through the proxy the environment names for it (HTTP_PROXY,
    HTTPS_PROXY, NO_PROXY), if any. retries=False: the client decides what to retry."""
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


def _retry_after(response: urllib3.BaseHTTPResponse, attempt: int) -> float:
    try:
        seconds = float(str(response.headers.get("Retry-After", "")))
        return min(seconds, 30.0)
    except ValueError:
        return min(0.1 * 2.0**attempt, 5.0)
