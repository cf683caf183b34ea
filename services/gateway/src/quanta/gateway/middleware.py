"""The edge of every request: request id, body size limit and read deadline, HTTP metrics, one access log line.

A plain ASGI middleware (not BaseHTTPMiddleware): it adds microseconds, not a
task per request, and it can cut a body off while it is still arriving.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quanta.common.logs import request_id
from quanta.gateway import metrics
from quanta.sparql.errors import ErrorKind

access = logging.getLogger("quanta.gateway.access")
SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class EdgeLimit(HTTPException):
    """A limit of the request's body, raised from `receive` while FastAPI reads it; an
    HTTPException so FastAPI re-raises it as is (main.py answers it as a problem)."""

    def __init__(self, kind: ErrorKind, detail: str, limit: float, close: bool = False) -> None:
        super().__init__(kind.status, detail, headers={"Connection": "close"} if close else None)
        self.kind, self.limit = kind, limit


class BodyTooLarge(EdgeLimit):
    def __init__(self, limit: int) -> None:
        super().__init__(ErrorKind.BODY_TOO_LARGE, f"the request body exceeds {limit} bytes", limit)


class BodyTimeout(EdgeLimit):
    """No piece of the body came within the deadline: the connection is closed after the answer
    (what is left of the body would arrive as the next request)."""

    def __init__(self, limit: float) -> None:
        super().__init__(
            ErrorKind.REQUEST_TIMEOUT, f"no part of the request body arrived within {limit:g} s", limit, close=True
        )


class Edge:
    def __init__(self, app: ASGIApp, max_body_bytes: int, body_timeout_s: float, access_log: bool = True) -> None:
        self.app, self.max_body_bytes, self.access_log = app, max_body_bytes, access_log
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope["headers"])
        incoming = headers.get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if SAFE_ID.match(incoming) else uuid.uuid4().hex
        context = request_id.set(rid)
        declared = headers.get(b"content-length", b"")
        limit = self.max_body_bytes
        received = 0
        body_done = False
        status = 500

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if declared.isdigit() and int(declared) > limit:
                metrics.REJECTED.labels("too_large").inc()
                raise BodyTooLarge(limit)
            if body_done:  # what comes now is the disconnect a streaming answer listens for: no deadline
                return await receive()
            try:
                async with asyncio.timeout(self.body_timeout_s):
                    message = await receive()
            except TimeoutError:
                metrics.REJECTED.labels("body_timeout").inc()
                raise BodyTimeout(self.body_timeout_s) from None
            body_done = not message.get("more_body", False)
            received += len(message.get("body", b""))
            if received > limit:
                metrics.REJECTED.labels("too_large").inc()
                raise BodyTooLarge(limit)
            return message

        async def tagged_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, limited_receive, tagged_send)
        finally:
            if scope.get("state", {}).get("client_closed") and status == 500:
                status = 499  # the client left before any answer (nginx's code for it)
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics.HTTP_REQUESTS.labels(route, scope["method"], str(status)).inc()
            metrics.HTTP_DURATION.labels(route).observe(elapsed)
            if self.access_log:
                access.info(
                    "request",
                    extra={"method": scope["method"], "path": scope["path"], "route": route, "status": status,
                           "duration_ms": round(elapsed * 1000, 3), "client": (scope.get("client") or ("",))[0],
                           "task_id": scope.get("state", {}).get("task_id")},
                )  # fmt: skip
            request_id.reset(context)
