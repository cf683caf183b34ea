"""Helpers for tests of the clients: a scripted HTTP server that answers each request with
the next scripted answer and records what it got."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

Answer = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, headers


class Scripted:
    """Answers each request (POST or GET, also as a proxy) with the next scripted answer, and
    records the POST bodies, the paths and the times."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = list(answers)
        self.bodies: list[Any] = []
        self.times: list[float] = []
        self.paths: list[str] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                script.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                script.times.append(time.monotonic())
                self.do_GET()

            def do_GET(self) -> None:
                script.paths.append(self.path)
                status, body, headers = script.answers.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Script(Protocol):
    """The `scripted` fixture: a server that gives these answers, running."""

    def __call__(self, *answers: Answer) -> Scripted: ...
