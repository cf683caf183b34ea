"""`quanta worker`: open the catalog's datasets, then serve tasks until SIGTERM."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from quanta.common import keys
from quanta.common.catalog import CatalogError, Dataset, load_catalog
from quanta.common.connect import sync_client
from quanta.common.logs import setup_json_logging
from quanta.common.settings import SettingsError
from quanta.engine.execute import warm_up
from quanta.engine.storage import TripleStore, backend_name, open_store, side_index_path
from quanta.worker.config import BLOCK_S, WorkerSettings
from quanta.worker.consumer import Consumer
from quanta.worker.health import Health
from quanta.worker.health import serve as serve_health
from quanta.worker.runner import Runner
from quanta.worker.stalls import StallRecorder

log = logging.getLogger("quanta.worker")


def configure(parser: argparse.ArgumentParser) -> None:
    # Flags override the environment (WorkerSettings); None means "not given".
    parser.add_argument("--catalog", help="dataset catalog (TOML; default: $QUANTA_CATALOG)")
    parser.add_argument("--name", help="consumer name (default: $QUANTA_WORKER_NAME, else host name and pid)")
    parser.add_argument("--metrics-port", type=int, help="serve /metrics, /livez, /readyz on this port (0: off)")
    parser.add_argument(
        "--reclaim-idle-ms", type=int, help="take over tasks idle this long (default: the stall limit plus 1 s)"
    )
    parser.add_argument(
        "--stall-s",
        type=float,
        help="exit when one task's engine work runs this long (default: 10 quanta, at least 5 s; inf: never)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        settings = WorkerSettings.from_env(
            catalog=args.catalog,
            name=args.name,
            metrics_port=args.metrics_port,
            reclaim_idle_ms=args.reclaim_idle_ms,
            stall_s=args.stall_s,
        )
    except SettingsError as e:
        print(f"quanta worker: {e}", file=sys.stderr)
        return 2
    setup_json_logging(settings.log_level)
    if not settings.catalog:
        print("quanta worker: --catalog (or QUANTA_CATALOG) is required", file=sys.stderr)
        return 2
    try:
        datasets = load_catalog(settings.catalog)
    except CatalogError as e:
        print(f"quanta worker: {e}", file=sys.stderr)
        return 2
    stall = settings.stall_limit_s(datasets.values())
    if stall is not None and os.getpid() == 1:
        # PID 1 (a container's first process) ignores every signal it has no handler for, even
        # SIGKILL from within its container, so the stall recorder could not end it: the worker
        # runs as the child of an init of its own (forked now: it shares the imports)
        child = os.fork()
        if child:
            return init(child)
    # The watchdog's second hand, for a worker stuck in C code: counts the stall against its task and
    # ends the worker; a process of its own, forked now, while this one has a single thread and no
    # Redis connection.
    recorder = StallRecorder(settings.redis, stall) if stall is not None else None
    health = Health(settings.liveness_timeout_s)
    if settings.metrics_port:
        serve_health(health, settings.metrics_host, settings.metrics_port)  # live while the datasets open
    # Blocking reads wait up to a second on top of the command timeout. One immediate retry (a
    # connection Redis closed) and no more: the task loop backs off on its own, and redis-py's
    # retries on top of it held a stopping worker for seconds when Redis had gone first.
    client = sync_client(
        settings.redis, socket_timeout=settings.redis.socket_timeout_s + BLOCK_S, retry=Retry(NoBackoff(), 1)
    )
    stores = {name: open_dataset(d, client) for name, d in datasets.items()}
    graphs = {name: {iri: open_dataset(d, client, iri) for iri, _ in d.graphs} for name, d in datasets.items()}
    for store in stores.values():  # one is enough: the first query's one-time costs are start-up's
        warm_up(store)
        break
    gc.freeze()  # what start-up built lives as long as the process: keep collections off it
    idle = settings.reclaim_after_ms(datasets.values())
    runner = Runner(datasets, stores, client, settings.name, graphs, stall_s=stall, recorder=recorder)
    consumer = Consumer(
        client, runner, settings.name, reclaim_idle_ms=idle, block_ms=int(BLOCK_S * 1000), health=health
    )

    terminated = False

    def stop(*_: object) -> None:
        nonlocal terminated
        terminated = health.stopping = True
        consumer.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    consumer.ensure_group()
    health.serving = True
    log.info(
        "worker serving",
        extra={"worker": settings.name, "datasets": sorted(datasets), "stall_s": stall, "reclaim_idle_ms": idle},
    )
    try:
        consumer.serve()
    finally:
        if recorder is not None:
            recorder.close()
    if consumer.restart and not terminated:
        return restart_in_place(settings.name)
    log.info("worker stopped", extra={"worker": settings.name})
    return 0


def init(child: int) -> int:
    """PID 1's duties while the worker, `child`, runs: pass it the signals that stop a container
    (SIGTERM, SIGINT, SIGHUP), reap every orphan (the stall recorder of a worker that ended), and
    exit as the worker did (128 + N when signal N ended it, as a shell says)."""

    def forward(signum: int, _: object) -> None:
        with contextlib.suppress(ProcessLookupError):  # it just ended: os.wait says so next
            os.kill(child, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            pid, status = os.wait()  # a signal's handler runs, then it waits again (PEP 475)
        except ChildProcessError:
            return 1
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def restart_in_place(name: str) -> int:
    """Start afresh after a stalled task, whose interruption may have left caches or pooled plans
    half-updated: a new interpreter in this process (execv), with the same pid, arguments and
    name. Neither the kubelet nor `quanta up` sees an exit, so a query that stalls workers over
    and over cannot push them into a crash loop's backoff. Returns (1) only if the exec failed."""
    log.warning("worker restarts in place (a stalled task, or a lost stall recorder)", extra={"worker": name})
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ["QUANTA_WORKER_NAME"] = name  # the same name, even when it was made of the pid (as PID 1's child)
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError:
        setup_json_logging("INFO")  # logging was shut down for the exec
        log.exception("could not restart in place: exiting")
        return 1


def open_dataset(dataset: Dataset, client: redis.Redis, graph: str | None = None) -> TripleStore:
    """Open a dataset's HDT file (or one of its named graphs' files) on the
    native store. The catalog's `backend`, else $QUANTA_BACKEND, is checked
    here: the retired `pyhdt` is accepted, runs on the native store and logs
    a warning (once per process); any other unknown name fails the start.
    If the file's side index is missing, one worker builds it (under a Redis
    lock) while the others wait."""
    backend = backend_name(dataset.backend or None)
    path = dataset.path if graph is None else dataset.graph(graph)
    assert path is not None
    name = dataset.store_name(graph)
    index = Path(side_index_path(str(path)))
    lock = keys.index_lock(str(index))
    while not index.exists():
        if client.set(lock, "1", nx=True, ex=1800):
            try:
                with native_output_logged(f"indexed {path}"):
                    return open_store(str(path), name=name, backend=backend)  # builds the index
            finally:
                client.delete(lock)
        log.info("waiting for another worker to index the dataset", extra={"path": str(path)})
        time.sleep(0.5)
    return open_store(str(path), name=name, backend=backend)


@contextlib.contextmanager
def native_output_logged(message: str) -> Iterator[None]:
    """hdt-cpp prints its progress on the process's stdout and stderr: catch those file
    descriptors while it runs, then log what it printed as one JSON record."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 1)
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            caught.seek(0)
            log.info(message, extra={"native_output": caught.read().decode(errors="replace")})


def main(argv: list[str] | None = None) -> int:
    """`python -m quanta.worker.cli`: the same command without the `quanta` entry point (the worker image)."""
    parser = argparse.ArgumentParser(prog="quanta worker", description=__doc__)
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
