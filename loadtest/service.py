"""The systems under test, on this machine: a quanta service whose parts can be
killed and restarted one by one (Redis with an append-only file as the Helm chart
runs it, N workers each with a metrics port, the gateway); Apache Jena Fuseki
(`scripts/jena.sh`'s jar) and Virtuoso (Debian's package, started by bench/peers.py),
each with or without the limits a public endpoint sets.

`quanta up` restarts a dead worker but stops when its gateway dies, and its Redis
keeps nothing: the fault runs need each part in hand, hence this.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quanta.common.redis_server import RedisServer, free_port, wait_ready

REPO = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "quanta.cli.main"]
DATA = Path(os.environ.get("QUANTA_LOADTEST_DATA", "/tmp/quanta-loadtest"))  # copies of the HDT files


def serve_copy(hdt: Path) -> Path:
    """A copy of `hdt` with its side index, in DATA (never write beside the shared files)."""
    DATA.mkdir(parents=True, exist_ok=True)
    copy = DATA / hdt.name
    if not copy.exists() or copy.stat().st_size != hdt.stat().st_size:
        shutil.copy(hdt, copy)
    from quanta.engine.storage import open_store

    open_store(str(copy))  # builds the side index once, before any worker starts
    return copy


class Quanta:
    """Redis (AOF), `workers` worker processes and one gateway, on free ports."""

    def __init__(
        self,
        hdt: Path,
        *,
        workers: int = 1,
        quantum_ms: float = 75,
        dataset: str = "watdiv",
        plan_mode: str = "auto",
        appendonly: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="quanta-loadtest-"))
        self.dataset = dataset
        self.quantum_ms = quantum_ms
        fcfs = quantum_ms == float("inf")
        # first come, first served: no quantum, and a page holds the whole answer (a byte budget
        # would end pages, hence turns, early)
        pages = "max_results = 100000000\nmax_page_bytes = 4294967296\n" if fcfs else ""
        (self.dir / "catalog.toml").write_text(
            f'[datasets.{dataset}]\npath = "{serve_copy(hdt)}"\nquantum_ms = {"inf" if fcfs else quantum_ms}\n'
            f'plan_mode = "{plan_mode}"\n{pages}'
        )
        self.redis = RedisServer(appendonly=appendonly)  # the chart's Redis keeps an append-only file
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "QUANTA_CATALOG": str(self.dir / "catalog.toml"),
            "QUANTA_SECRET_KEYS": "loadtest:0123456789abcdef0123456789abcdef",
            "QUANTA_REDIS_URL": self.redis.url,
            "QUANTA_ACCESS_LOG": "0",
            "QUANTA_REPLY_TIMEOUT_S": "120",
            # every Locust user comes from this machine's address, and their X-API-Keys are not
            # authenticated (QUANTA_API_KEY_HASHES): keep the per-client limits out of the way of
            # users that loop over their workloads
            "QUANTA_RATE_LIMIT": "0",
            "QUANTA_SPARQL_QUERY_RATE": "0",
            "QUANTA_SPARQL_MAX_QUERIES": "0",
            "QUANTA_MAX_CLIENT_TASKS": "1000000",
            **(env or {}),
        }
        self.metrics_ports = [free_port() for _ in range(workers)]
        self.workers: list[subprocess.Popen[bytes]] = []
        self.gateway: subprocess.Popen[bytes] | None = None
        self.log = open(self.dir / "service.log", "ab")  # noqa: SIM115

    def start(self) -> Quanta:
        self.redis.start()
        self.workers = [self._worker(i) for i in range(len(self.metrics_ports))]
        self.start_gateway()
        for worker, port in zip(self.workers, self.metrics_ports, strict=True):  # a dead one fails here, not later
            if not wait_ready(f"http://127.0.0.1:{port}", worker, timeout=120):
                raise RuntimeError(f"a worker did not become ready (log: {self.dir / 'service.log'})")
        return self

    def _worker(self, i: int) -> subprocess.Popen[bytes]:
        name = f"loadtest-worker-{i}-{time.time_ns()}"
        command = [*COMMAND, "worker", "--name", name, "--metrics-port", str(self.metrics_ports[i])]
        return subprocess.Popen(command, env=self.env, stdout=self.log, stderr=self.log)

    def start_gateway(self) -> None:
        command = [*COMMAND, "gateway", "--host", "127.0.0.1", "--port", str(self.port)]
        self.gateway = subprocess.Popen(command, env=self.env, stdout=self.log, stderr=self.log)
        if not wait_ready(self.url, self.gateway, timeout=120):
            raise RuntimeError(f"the gateway did not become ready (log: {self.dir / 'service.log'})")

    def kill_worker(self, i: int = 0) -> None:
        """SIGKILL worker i mid-quantum, and start another in its place at once (as a
        Deployment or `quanta up` would)."""
        self.workers[i].send_signal(signal.SIGKILL)
        self.workers[i].wait()
        self.workers[i] = self._worker(i)

    def restart_gateway(self) -> None:
        """SIGTERM the gateway (requests in flight are cut), start it again."""
        assert self.gateway is not None
        self.gateway.terminate()
        self.gateway.wait(timeout=30)
        self.start_gateway()

    def restart_redis(self) -> None:
        """SIGTERM Redis and start it on the same port (from its append-only file, if it keeps one)."""
        self.redis.restart()

    def worker_metrics(self) -> list[str]:
        """Each worker's Prometheus text (what a scrape would read)."""
        texts = []
        for port in self.metrics_ports:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    texts.append(response.read().decode())
            except OSError:
                texts.append("")
        return texts

    def pids(self) -> dict[str, list[int]]:
        return {
            "workers": [w.pid for w in self.workers],
            "gateway": [self.gateway.pid] if self.gateway else [],
            "redis": [self.redis.process.pid] if self.redis.process else [],
        }

    def stop(self) -> None:
        for proc in [self.gateway, *self.workers]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in [self.gateway, *self.workers]:
            if proc is not None:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.redis.stop()
        self.log.close()
        shutil.rmtree(self.redis.dir, ignore_errors=True)


@contextmanager
def quanta(hdt: Path, **options: Any) -> Iterator[Quanta]:
    service = Quanta(hdt, **options).start()
    try:
        yield service
    finally:
        service.stop()


def jena_jar() -> str:
    done = subprocess.run([str(REPO / "scripts" / "jena.sh")], check=True, capture_output=True, text=True)
    return done.stdout.strip()


@dataclass
class Peer:
    """A peer's SPARQL server: its root URL (the endpoint's path is the experiment's option) and process."""

    url: str
    pid: int
    restart: Callable[[], None] | None = None  # kill the server and start it again on its data

    def pin(self, cpus: int) -> None:
        """Let the server's threads use the first `cpus` cores only: the counterpart of
        quanta's worker count (one core per worker)."""
        cores = ",".join(str(c) for c in range(cpus))
        subprocess.run(["taskset", "-a", "-p", "-c", cores, str(self.pid)], check=True, capture_output=True)


@contextmanager
def fuseki(ntriples: Path, *, timeout_s: float | None = None, heap: str = "4g") -> Iterator[Peer]:
    """Apache Jena Fuseki over `ntriples` in memory, at /watdiv/sparql. `timeout_s`: its query time limit
    (`--timeout`, as a public endpoint configures one: the query is cancelled, with a 503 if
    no result was sent yet, else the response is cut)."""
    port = free_port()
    command = ["java", f"-Xmx{heap}", "-jar", jena_jar(), "--port", str(port), f"--file={ntriples}"]
    if timeout_s:
        command.append(f"--timeout={int(timeout_s * 1000)}")
    command.append("/watdiv")
    log = tempfile.NamedTemporaryFile(prefix="fuseki-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(f"{url}/watdiv/sparql?query=ASK%7B%7D", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Fuseki did not start (log: {log.name})")
            time.sleep(0.5)
        yield Peer(url, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


@contextmanager
def virtuoso(ntriples: Path, *, max_rows: int | None = None, max_seconds: int | None = None) -> Iterator[Peer]:
    """Virtuoso over `ntriples` (a `.nt.gz`), at /sparql, loaded by its bulk loader into a database of
    its own under DATA; `max_rows`, `max_seconds`: its row cap and execution time limit (None: none).
    Its `restart` kills the server (SIGKILL) and starts it again on its database, as a supervisor would."""
    sys.path.append(str(REPO / "bench"))  # after loadtest/: bench/ has a service.py too
    import peers  # bench/peers.py: how Virtuoso is installed, configured and loaded, for the benchmarks too

    DATA.mkdir(parents=True, exist_ok=True)
    plain = DATA / ntriples.name.removesuffix(".gz")
    if not plain.exists():
        with gzip.open(ntriples) as packed, open(plain.with_suffix(".part"), "wb") as out:
            shutil.copyfileobj(packed, out)
        plain.with_suffix(".part").rename(plain)
    work = DATA / f"virtuoso-{max_rows or 'all'}-{max_seconds or 'unlimited'}"
    with ExitStack() as stack:
        server = peers.start_virtuoso(
            stack, plain, work, graph="http://watdiv.example/", max_rows=max_rows, max_seconds=max_seconds
        )
        peer = Peer(server.url.removesuffix("/sparql"), server.pid)

        def restart() -> None:
            os.kill(peer.pid, signal.SIGKILL)
            db = work / "virtuoso"
            (db / "virtuoso.lck").unlink(missing_ok=True)  # left by the killed server
            process = peers.serve_virtuoso(stack, db, work / "virtuoso-restarted.out")
            peers.wait_sparql(server.url, process)
            peer.pid = process.pid

        peer.restart = restart
        yield peer
