"""A scripted HTTP server for the clients' protocol tests: it answers each
POST with the next scripted answer and records what it got."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from quanta.common.local import free_port

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: the tests import Answer from here

Answer = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, headers


class Scripted:
    """Answers each POST with the next scripted answer and records what it got (also as a proxy)."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers, self.bodies, self.times, self.paths = list(answers), [], [], []  # type: ignore[var-annotated]
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                script.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                script.paths.append(self.path)
                script.times.append(time.monotonic())
                status, body, headers = script.answers.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

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

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def start(*answers: Answer) -> Scripted:
        servers.append(Scripted(list(answers)))
        return servers[-1]

    yield start
    for server in servers:
        server.server.shutdown()
