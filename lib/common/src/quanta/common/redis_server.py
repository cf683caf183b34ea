"""Local processes: a redis-server on a free port of its own, for `quanta up` and for tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis


def wait_ready(url: str, process: subprocess.Popen[Any] | None = None, timeout: float = 60) -> bool:
    """Poll a service's /readyz until it answers 200; False on timeout or if
    `process` (the one serving it, or starting it) exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (process is None or process.poll() is None):
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The local Redis's memory limit (`quanta up`, tests): past it, writes are refused (noeviction)
# and the gateway answers 503 queue-full with Retry-After, rather than the host running out.
MAXMEMORY = os.environ.get("QUANTA_REDIS_MAXMEMORY", "1gb")


class RedisServer:
    """A throwaway redis-server process, restartable on the same port so tests can
    simulate a Redis restart. No persistence, or `appendonly=True`: an append-only
    file in its directory, as the Helm chart runs Redis (so a restart keeps the data).

    `maxmemory` bounds it with the policy `noeviction`: every key is a task, a reply, a
    kept plan or a client's quota, and evicting any of them would lose or corrupt a query,
    so at the limit Redis refuses writes instead (and the service answers 503)."""

    def __init__(self, port: int | None = None, *, appendonly: bool = False, maxmemory: str = MAXMEMORY) -> None:
        self.port = port or free_port()
        self.appendonly = appendonly
        self.maxmemory = maxmemory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tempfile.mkdtemp(prefix="quanta-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is missing: run `make install`")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--dir",
                self.dir,
                "--maxmemory",
                self.maxmemory,
                "--maxmemory-policy",
                "noeviction",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def restart(self) -> None:
        """Stop and start again: empty without persistence, from its append-only file with it."""
        self.stop()
        self.start()


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
