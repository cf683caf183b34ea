"""`quanta up`: the whole service on one machine, no Kubernetes: a
redis-server of its own, N worker processes and the gateway. Stops
everything it started on Ctrl-C or SIGTERM (and removes its temporary
folder); restarts a worker that dies or stops answering."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import redis

from quanta.common import keys
from quanta.common.catalog import CatalogError, Dataset, single_dataset_catalog, write_catalog
from quanta.common.connect import sync_client
from quanta.common.redis_server import RedisServer, wait_ready
from quanta.common.settings import RedisSettings, SettingsError

# the repository checkout this package is installed from (editable): services/cli/src/quanta/cli/up.py
SAMPLE = Path(__file__).resolve().parents[5] / "data" / "watdiv-100k.hdt"
EXAMPLE = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o } LIMIT 3"
LOCAL_QUANTUM_MS = 10  # the first quantum of a query, run in the gateway (QUANTA_LOCAL_QUANTUM_MS)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="gateway port on 127.0.0.1 (default 8000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--gateways", type=int, default=1, help="gateway processes, sharing the port (default 1; about one per core)"
    )
    parser.add_argument(
        "--quantum-ms", type=float, help="time quantum for every dataset (default 75; inf: never suspend)"
    )
    parser.add_argument(
        "--max-results",
        type=int,
        help="results per page at most for every dataset (default 100000; a page also ends at about 1 MiB of JSON)",
    )
    parser.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="NAME=FILE.hdt",
        help="a dataset to serve (repeatable; default: the bundled WatDiv sample)",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="Redis servers to shard the queue over, the workers spread between them (default 1)",
    )
    parser.add_argument(
        "--redis-url", help="use this Redis instead of starting one (several, comma-separated: the queue's shards)"
    )


def run(args: argparse.Namespace) -> int:
    try:
        datasets = single_dataset_catalog(args.dataset or [f"watdiv-100k={SAMPLE}"])
    except CatalogError as e:
        print(f"quanta up: {e}", file=sys.stderr)
        return 2
    overrides = {k: v for k, v in (("quantum_ms", args.quantum_ms), ("max_results", args.max_results)) if v is not None}
    datasets = {n: replace(d, **overrides) for n, d in datasets.items()}
    missing = [str(d.path) for d in datasets.values() if not d.path.exists()]
    if missing:
        print(f"quanta up: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="quanta-up-") as workdir:  # the catalog: restarted workers read it
        catalog = Path(workdir) / "catalog.toml"
        write_catalog(datasets, catalog)
        _index(datasets)  # build missing side indexes once, before any worker starts
        return _serve(args, datasets, catalog)


def _serve(args: argparse.Namespace, datasets: dict[str, Dataset], catalog: Path) -> int:
    from quanta.worker.config import WorkerSettings

    env = {
        **os.environ,
        "QUANTA_CATALOG": str(catalog),
        "QUANTA_SECRET_KEYS": os.environ.get("QUANTA_SECRET_KEYS", f"up:{secrets.token_urlsafe(32)}"),
        # the gateway runs a query's first quantum itself (it reads the same files as the workers)
        "QUANTA_LOCAL_QUANTUM_MS": os.environ.get("QUANTA_LOCAL_QUANTUM_MS", str(LOCAL_QUANTUM_MS)),
    }
    if args.shards < 1 or (args.redis_url and args.shards != 1):
        print("quanta up: --shards is a count of Redis servers to start, without --redis-url", file=sys.stderr)
        return 2
    servers = [] if args.redis_url else [RedisServer().start() for _ in range(args.shards)]
    env["QUANTA_REDIS_URL"] = args.redis_url or ",".join(server.url for server in servers)
    command = [sys.executable, "-m", "quanta.cli.main"]
    processes: list[subprocess.Popen[bytes]] = []
    workers: Workers | None = None
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    url = f"http://127.0.0.1:{args.port}"
    try:
        try:
            # what the workers read (their stall limit), each with one shard's URL
            shards = RedisSettings.from_env(env).shards()
            settings = WorkerSettings.from_env(env, redis={"url": shards[0].url})
        except SettingsError as e:
            print(f"quanta up: {e}", file=sys.stderr)
            return 2
        workers = Workers(command, env, args.workers, shards, settings.heartbeat_stale_s(datasets.values()))
        listen = ["--host", "127.0.0.1", "--port", str(args.port), "--workers", str(args.gateways)]
        gateway = subprocess.Popen([*command, "gateway", *listen], env=env)
        processes.append(gateway)
        if not wait_ready(url, gateway):
            print("quanta up: the gateway did not become ready", file=sys.stderr)
            return 1
        name = next(iter(datasets))
        sharded = f" over {len(shards)} Redis shards" if len(shards) > 1 else ""
        print(f"quanta is up at {url} ({args.workers} workers{sharded}; datasets: {', '.join(datasets)})")
        print(f"  open {url}/ in a browser: the query page")
        print(f"  SPARQL endpoint: {url}/sparql (any SPARQL 1.1 client; {url}/sparql/{name} by name)")
        print(f"  try: curl -s {url}/sparql --data-urlencode 'query={EXAMPLE}'")
        print(f"   or, one quantum per request: quanta client {url} {name} '{EXAMPLE}'")
        print("  Ctrl-C stops everything.", flush=True)
        while not stopping:
            if gateway.poll() is not None:
                print(f"quanta up: the gateway exited ({gateway.returncode})", file=sys.stderr)
                return 1
            workers.supervise()
            time.sleep(0.2)
        return 0
    finally:
        running = processes + (workers.processes() if workers is not None else [])
        for proc in running:
            if proc.poll() is None:
                proc.terminate()
        for proc in running:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if workers is not None:
            workers.close()
        for server in servers:
            server.stop()
            shutil.rmtree(server.dir, ignore_errors=True)  # its (empty) working folder, made by mkdtemp


# A worker is restarted at once; one that exits again this soon after its start is crash-looping:
# its next start waits BACKOFF_FIRST_S, then twice as long each time up to BACKOFF_MAX_S.
STABLE_S = 30.0
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
STARTUP_S = 60.0  # a started worker has this long to map its datasets and send its first heartbeat
CHECK_EVERY_S = 1.0  # how often heartbeats are read


@dataclass
class Slot:
    """One of the workers `up` keeps running."""

    index: int
    shard: int  # which of the queue's shards it serves
    proc: subprocess.Popen[bytes] | None = None
    name: str = ""
    started: float = 0.0  # time.time() of the current process's start
    backoff: float = 0.0  # the wait before the next start if the current process exits soon
    start_at: float = 0.0  # time.monotonic() from which the next process may start


class Workers:
    """`up`'s worker processes, supervised as a Deployment's pods are by the kubelet: one that
    exits is started again (after a backoff that grows while it keeps exiting soon after its
    start), and one whose heartbeat (keys.WORKERS, refreshed by its task loop) is older than
    `stale_s` is stuck, killed and started again. The worker's own watchdog ends a worker stuck in a
    task; this catches the rest (a process stopped with SIGSTOP, a watchdog turned off).
    Worker i serves shard i mod len(`shards`)."""

    def __init__(
        self, command: list[str], env: dict[str, str], count: int, shards: list[RedisSettings], stale_s: float | None
    ) -> None:
        self.command, self.env, self.stale_s = command, env, stale_s
        self.shards = shards
        self.slots = [Slot(i, i % len(shards)) for i in range(count)]
        self.redis = [sync_client(s, socket_timeout=1.0, socket_connect_timeout=1.0) for s in shards]
        self.checked = time.monotonic()
        for slot in self.slots:
            self._start(slot)

    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [slot.proc for slot in self.slots if slot.proc is not None]

    def supervise(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is not None:
                self._exited(slot, f"exited ({slot.proc.returncode})")
            if slot.proc is None and now >= slot.start_at:
                self._start(slot)
        if self.stale_s is not None and now - self.checked >= CHECK_EVERY_S:
            self.checked = now
            self._kill_stuck(self.stale_s)

    def close(self) -> None:
        for client in self.redis:
            client.close()

    def _start(self, slot: Slot) -> None:
        slot.name = f"up-worker-{slot.index}-{time.time_ns()}"
        slot.started = time.time()
        env = {**self.env, "QUANTA_REDIS_URL": self.shards[slot.shard].url}
        slot.proc = subprocess.Popen([*self.command, "worker", "--name", slot.name], env=env)

    def _exited(self, slot: Slot, why: str) -> None:
        delay = slot.backoff if time.time() - slot.started < STABLE_S else 0.0
        slot.backoff = min(max(2 * delay, BACKOFF_FIRST_S), BACKOFF_MAX_S)  # for the next quick exit
        slot.start_at = time.monotonic() + delay
        slot.proc = None
        with contextlib.suppress(redis.RedisError):
            self.redis[slot.shard].zrem(keys.WORKERS, slot.name)  # readiness counts live workers only
        later = f" in {delay:g} s" if delay else ""
        print(f"quanta up: worker {slot.index} {why}; starting another{later}", file=sys.stderr, flush=True)

    def _kill_stuck(self, stale_s: float) -> None:
        for shard, client in enumerate(self.redis):
            live = [slot for slot in self.slots if slot.proc is not None and slot.shard == shard]
            if not live:
                continue
            try:
                beats: list[float | None] = client.zmscore(keys.WORKERS, [slot.name for slot in live])
            except redis.RedisError:
                continue  # Redis does not answer: its workers cannot beat either; nothing to judge by
            self._judge(live, beats, stale_s)

    def _judge(self, live: list[Slot], beats: list[float | None], stale_s: float) -> None:
        now = time.time()
        for slot, beat in zip(live, beats, strict=True):
            since = beat if beat is not None else slot.started + STARTUP_S
            if now - since > stale_s and slot.proc is not None:
                slot.proc.kill()  # SIGKILL: a stuck or stopped process does not act on SIGTERM
                slot.proc.wait()
                self._exited(slot, f"sent no heartbeat for {now - since:.0f} s (stuck): killed")


def _index(datasets: dict[str, Dataset]) -> None:
    from quanta.engine.storage import open_store, side_index_path

    for d in datasets.values():
        if not Path(side_index_path(str(d.path))).exists():
            open_store(str(d.path), name=d.name, backend=d.backend or None)  # builds the side index
