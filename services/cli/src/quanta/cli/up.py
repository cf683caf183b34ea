"""`quanta up`: the whole service on one machine, no Kubernetes: a
redis-server of its own, N worker processes and the gateway. Stops
everything it started on Ctrl-C or SIGTERM; restarts a worker that dies."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from quanta.common.catalog import CatalogError, Dataset, single_dataset_catalog, write_catalog
from quanta.common.local import RedisServer, wait_ready

# the repository checkout this package is installed from (editable): services/cli/src/quanta/cli/up.py
SAMPLE = Path(__file__).resolve().parents[5] / "data" / "watdiv-100k.hdt"
EXAMPLE = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o } LIMIT 3"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="gateway port on 127.0.0.1 (default 8000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
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
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")


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
    workdir = Path(tempfile.mkdtemp(prefix="quanta-up-"))
    catalog = workdir / "catalog.toml"
    write_catalog(datasets, catalog)
    _index(datasets)  # build missing side indexes once, before any worker starts

    redis = None if args.redis_url else RedisServer().start()
    env = {
        **os.environ,
        "QUANTA_REDIS_URL": args.redis_url or redis.url,  # type: ignore[union-attr]
        "QUANTA_CATALOG": str(catalog),
        "QUANTA_SECRET_KEYS": os.environ.get("QUANTA_SECRET_KEYS", f"up:{secrets.token_urlsafe(32)}"),
    }
    command = [sys.executable, "-m", "quanta.cli.main"]
    workers = [_worker(command, env, i) for i in range(args.workers)]
    gateway = subprocess.Popen([*command, "gateway", "--host", "127.0.0.1", "--port", str(args.port)], env=env)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    url = f"http://127.0.0.1:{args.port}"
    try:
        if not wait_ready(url, gateway):
            print("quanta up: the gateway did not become ready", file=sys.stderr)
            return 1
        name = next(iter(datasets))
        print(f"quanta is up at {url} ({args.workers} workers; datasets: {', '.join(datasets)})")
        print(f"  open {url}/ in a browser: the query page")
        print(f"  SPARQL endpoint: {url}/sparql (any SPARQL 1.1 client; {url}/sparql/{name} by name)")
        print(f"  try: curl -s {url}/sparql --data-urlencode 'query={EXAMPLE}'")
        print(f"   or, one quantum per request: quanta client {url} {name} '{EXAMPLE}'")
        print("  Ctrl-C stops everything.", flush=True)
        while not stopping:
            if gateway.poll() is not None:
                print(f"quanta up: the gateway exited ({gateway.returncode})", file=sys.stderr)
                return 1
            for i, worker in enumerate(workers):
                if worker.poll() is not None and not stopping:
                    print(f"quanta up: worker {i} exited ({worker.returncode}); starting another", file=sys.stderr)
                    workers[i] = _worker(command, env, i)
            time.sleep(0.2)
        return 0
    finally:
        for proc in [gateway, *workers]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [gateway, *workers]:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if redis is not None:
            redis.stop()


def _worker(command: list[str], env: dict[str, str], i: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*command, "worker", "--name", f"up-worker-{i}-{time.time_ns()}"], env=env)


def _index(datasets: dict[str, Dataset]) -> None:
    from quanta.engine.storage import open_store, side_index_path

    for d in datasets.values():
        if not Path(side_index_path(str(d.path), d.backend or None)).exists():
            open_store(str(d.path), name=d.name, backend=d.backend or None)  # builds the side index
