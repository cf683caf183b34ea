"""`quanta worker`: open the catalog's datasets, then serve tasks until SIGTERM."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import redis
from prometheus_client import start_http_server

from quanta.common.catalog import CatalogError, Dataset, load_catalog
from quanta.common.settings import RedisSettings
from quanta.engine.storage.hdt import HdtStore
from quanta.worker.consumer import Consumer
from quanta.worker.runner import Runner

log = logging.getLogger("quanta.worker")

INDEX_SUFFIX = ".index.v1-1"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--catalog", default=os.environ.get("QUANTA_CATALOG"), help="dataset catalog (TOML)")
    parser.add_argument("--name", default=f"{socket.gethostname()}-{os.getpid()}", help="consumer name")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ.get("QUANTA_METRICS_PORT", "0")),
        help="serve Prometheus metrics on this port (0: off)",
    )
    parser.add_argument(
        "--reclaim-idle-ms",
        type=int,
        default=int(os.environ.get("QUANTA_RECLAIM_IDLE_MS", "0")),
        help="take over tasks idle this long (default: 10 quanta, at least 1 s)",
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format='{"time":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","message":"%(message)s"}',
    )
    if not args.catalog:
        print("quanta worker: --catalog (or QUANTA_CATALOG) is required", file=sys.stderr)
        return 2
    try:
        datasets = load_catalog(args.catalog)
    except CatalogError as e:
        print(f"quanta worker: {e}", file=sys.stderr)
        return 2
    client = redis.Redis.from_url(RedisSettings.from_env().url, socket_timeout=10)
    stores = {name: open_dataset(d, client) for name, d in datasets.items()}
    gc.freeze()  # what start-up built lives as long as the process: keep collections off it
    if args.metrics_port:
        start_http_server(args.metrics_port)
    idle = args.reclaim_idle_ms or reclaim_idle_ms(datasets.values())
    consumer = Consumer(client, Runner(datasets, stores, client, args.name), args.name, reclaim_idle_ms=idle)
    signal.signal(signal.SIGTERM, lambda *_: consumer.stop())
    signal.signal(signal.SIGINT, lambda *_: consumer.stop())
    consumer.ensure_group()
    log.info("worker %s serving %s", args.name, ", ".join(datasets))
    consumer.serve()
    log.info("worker %s stopped", args.name)
    return 0


def reclaim_idle_ms(datasets: Iterable[Dataset]) -> int:
    """Ten quanta of the slowest dataset, at least a second: a healthy worker
    always answers well within that. An infinite quantum can run for long,
    so its tasks are reclaimed only after 10 minutes."""
    longest = max(d.quantum_ms for d in datasets)
    return 600_000 if longest == float("inf") else max(1000, int(10 * longest))


def open_dataset(dataset: Dataset, client: redis.Redis) -> HdtStore:
    """Open an HDT file; if its side index is missing, one worker builds it
    (under a Redis lock) while the others wait for it."""
    index = Path(str(dataset.path) + INDEX_SUFFIX)
    lock = f"quanta:lock:index:{dataset.path}"
    while not index.exists():
        if client.set(lock, "1", nx=True, ex=1800):
            try:
                return HdtStore(str(dataset.path), name=dataset.name)  # builds and saves the index
            finally:
                client.delete(lock)
        log.info("waiting for another worker to index %s", dataset.path)
        time.sleep(0.5)
    return HdtStore(str(dataset.path), name=dataset.name)
