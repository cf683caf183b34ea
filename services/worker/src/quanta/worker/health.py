"""The worker's probes and metrics over HTTP (one port): /livez, /readyz, /metrics.

arq's pattern (record_health / check_health), kept in the process: the task
loop records a beat every time it comes round (at least once a second, plus
the quantum in hand); a server thread answers the probes from those beats.

- /livez: 200 unless the loop has not come round for `liveness_timeout_s`
  (stuck: restart it). While the worker starts (mapping the datasets, maybe
  building a side index) it is live.
- /readyz: 200 once the datasets are mapped and the worker reads the stream,
  while Redis answers and the loop is live; 503 after SIGTERM (draining).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest


class Health:
    def __init__(self, liveness_timeout_s: float) -> None:
        self.liveness_timeout_s = liveness_timeout_s
        self.serving = False  # datasets mapped, consumer group joined
        self.redis_ok = False
        self.stopping = False
        self.beat_at = time.monotonic()

    def record(self, redis_ok: bool) -> None:
        """Called by the loop each time round (arq's record_health)."""
        self.beat_at = time.monotonic()
        self.redis_ok = redis_ok

    def age_s(self) -> float:
        return time.monotonic() - self.beat_at

    def live(self) -> bool:
        return not self.serving or self.age_s() < self.liveness_timeout_s

    def ready(self) -> bool:
        return self.serving and self.redis_ok and not self.stopping and self.live()

    def state(self) -> dict[str, object]:
        return {
            "serving": self.serving,
            "redis": self.redis_ok,
            "stopping": self.stopping,
            "loop_age_s": round(self.age_s(), 3),
        }


def serve(health: Health, host: str, port: int) -> ThreadingHTTPServer:
    """Start the HTTP server in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            elif self.path in ("/livez", "/readyz"):
                ok = health.live() if self.path == "/livez" else health.ready()
                body = json.dumps({"status": "ok" if ok else "failing", **health.state()}).encode()
                self._send(200 if ok else 503, body, "application/json")
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: not worth a line
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
