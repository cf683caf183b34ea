"""The service end to end: a real redis-server, real worker processes and a
real gateway (uvicorn) on free ports, driven over HTTP."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from quanta.common.redis_server import RedisServer, free_port, wait_ready

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "watdiv-100k.hdt"
EXAMPLES = SAMPLE.with_suffix(".examples.toml")  # the sample's example queries (the query page's)
COMMAND = [sys.executable, "-m", "quanta.cli.main"]


@dataclass
class Service:
    url: str
    redis: RedisServer
    env: dict[str, str]
    max_results: int
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    gateway: subprocess.Popen[bytes] | None = None

    def start_worker(self) -> subprocess.Popen[bytes]:
        name = f"e2e-worker-{len(self.workers)}"
        proc = subprocess.Popen([*COMMAND, "worker", "--name", name], env=self.env, stderr=subprocess.DEVNULL)
        self.workers.append(proc)
        return proc

    def wait_ready(self) -> None:
        assert wait_ready(self.url, self.gateway), "service not ready"

    def stop(self) -> None:
        for proc in [self.gateway, *self.workers]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [self.gateway, *self.workers]:
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()


SMALL_QUERY = "SELECT ?s WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o } LIMIT 1"


@dataclass
class Stalls:
    """What a bystander saw while an attack ran: each small request's seconds, and failures."""

    times: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def worst(self) -> float:
        return max(self.times, default=float("inf"))


@contextmanager
def bystander(url: str, path: str = "/sparql", every_s: float = 0.1, timeout_s: float = 10.0) -> Iterator[Stalls]:
    """Send a small query (or GET `path` when it is not /sparql) every `every_s` while the block
    runs, from another thread; the worst time tells how long the attack stalled other clients."""
    seen = Stalls()
    done = threading.Event()

    def loop() -> None:
        with httpx.Client(base_url=url, timeout=timeout_s, headers={"X-Forwarded-For": "203.0.113.7"}) as http:
            while not done.is_set():
                started = time.perf_counter()
                try:
                    if path == "/sparql":
                        r = http.post(path, data={"query": SMALL_QUERY}, headers={"Accept": "text/csv"})
                    else:
                        r = http.get(path)
                    if r.status_code != 200:
                        seen.failures.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as e:
                    seen.failures.append(repr(e))
                seen.times.append(time.perf_counter() - started)
                done.wait(every_s)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join(timeout_s + 1)


def start_service(
    tmp: Path,
    *,
    workers: int = 2,
    quantum_ms: float = 2,
    max_results: int = 500,
    examples: bool = False,
    graphs: dict[str, Path] | None = None,
    **env: str,
) -> Service:
    """`graphs`: named graphs of the dataset (IRI -> HDT file)."""
    shutil.copy(SAMPLE, tmp / "watdiv-100k.hdt")
    catalog = tmp / "catalog.toml"
    named = "".join(f'"{iri}" = "{path}"\n' for iri, path in (graphs or {}).items())
    catalog.write_text(
        f'[datasets.watdiv]\npath = "watdiv-100k.hdt"\nquantum_ms = {quantum_ms}\nmax_results = {max_results}\n'
        + (f'examples = "{EXAMPLES}"\n' if examples else "")
        + (f"[datasets.watdiv.graphs]\n{named}" if named else "")
    )
    redis = RedisServer().start()
    port = free_port()
    service_env = {
        **os.environ,
        "QUANTA_REDIS_URL": redis.url,
        "QUANTA_CATALOG": str(catalog),
        "QUANTA_SECRET_KEYS": "e2e:0123456789abcdef0123456789abcdef",
        **env,
    }
    service = Service(f"http://127.0.0.1:{port}", redis, service_env, max_results)
    # index the copy once, before workers start
    from quanta.engine.storage import open_store

    open_store(str(tmp / "watdiv-100k.hdt"))  # the configured backend's side index
    for _ in range(workers):
        service.start_worker()
    service.gateway = subprocess.Popen(
        [*COMMAND, "gateway", "--host", "127.0.0.1", "--port", str(port)], env=service_env, stderr=subprocess.DEVNULL
    )
    service.wait_ready()
    return service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("e2e"))
    yield svc
    svc.stop()
    svc.redis.stop()


@pytest.fixture(scope="module")
def module_service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service for one test module, started with its SERVICE_OPTIONS (start_service's keywords)."""
    svc = start_service(tmp_path_factory.mktemp("module"), **getattr(request.module, "SERVICE_OPTIONS", {}))
    yield svc
    svc.stop()
    svc.redis.stop()


@pytest.fixture
def make_service(tmp_path: Path):
    """Start a service of its own (stopped after the test)."""
    started: list[Service] = []

    def make(**options) -> Service:
        folder = tmp_path / f"svc{len(started)}"
        folder.mkdir()
        svc = start_service(folder, **options)
        started.append(svc)
        return svc

    yield make
    for svc in started:
        svc.stop()
        svc.redis.stop()
