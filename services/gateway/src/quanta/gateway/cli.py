"""`quanta gateway`: serve the HTTP API with uvicorn (flags for the listener, QUANTA_* env vars for the rest)."""

from __future__ import annotations

import argparse
import logging
import logging.config
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from quanta.common.catalog import CatalogError, load_catalog
from quanta.common.logs import JsonFormatter
from quanta.common.settings import SettingsError
from quanta.gateway.config import Settings

log = logging.getLogger("quanta.gateway")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn processes (default: %(default)s)")
    parser.add_argument("--catalog", metavar="FILE", help="dataset catalog (default: $QUANTA_CATALOG)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def run(args: argparse.Namespace) -> int:
    config = logging_config(args.log_level.upper())
    logging.config.dictConfig(config)
    if args.catalog:
        os.environ["QUANTA_CATALOG"] = str(Path(args.catalog).resolve())
    settings = _check_settings()
    if settings is None:
        return 2
    if settings.dev and not os.environ.get("QUANTA_SECRET_KEYS"):
        # Every process must sign with the same key, or pages would fail on the next process.
        os.environ["QUANTA_SECRET_KEYS"] = settings.secret_keys
    own_dir = _multiprocess_dir(args.workers)
    import uvicorn  # after PROMETHEUS_MULTIPROC_DIR is set: prometheus_client reads it at import

    from quanta.gateway.server import Limits, connection_cap  # after it too: it imports the metrics

    cap = connection_cap(settings.max_connections)
    log.info("connection limits", extra={"limits": repr(Limits.of(settings)), "connection_cap": cap})

    try:
        uvicorn.run(
            "quanta.gateway.main:create_app", factory=True, host=args.host, port=args.port, workers=args.workers,
            log_config=config, access_log=False, proxy_headers=False,
            timeout_graceful_shutdown=int(settings.reply_timeout_s) + 5,
            # Deadlines, size caps and a connection cap (server.py); its idle deadline is uvicorn's keep-alive's.
            http="quanta.gateway.server:GuardedProtocol", timeout_keep_alive=math.ceil(settings.idle_timeout_s),
        )  # fmt: skip
    finally:
        if own_dir:
            shutil.rmtree(own_dir, ignore_errors=True)
    return 0


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """JSON lines (quanta.common.logs) for the gateway and uvicorn, as a dictConfig: uvicorn applies
    it in each of its worker processes."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True, "level": level},
            "uvicorn.error": {"handlers": [], "propagate": True, "level": level},
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
        },
    }


def _check_settings() -> Settings | None:
    """Settings and catalog, or None after saying what is wrong (fail before forking workers)."""
    try:
        settings = Settings.from_env()
        load_catalog(settings.catalog)
    except (SettingsError, CatalogError) as error:
        print(f"quanta gateway: {error}", file=sys.stderr)
        return None
    return settings


def _multiprocess_dir(workers: int) -> str | None:
    """Several processes share metrics through files; make a directory for them if none is set."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    own = None
    if path is None and workers > 1:
        path = own = tempfile.mkdtemp(prefix="quanta-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    if path:
        # Values left by a previous run would be summed with this one's.
        for stale in Path(path).glob("*.db"):
            stale.unlink(missing_ok=True)
    return own


def main(argv: list[str] | None = None) -> int:
    """`python -m quanta.gateway.cli`: the same command without the `quanta` entry point."""
    parser = argparse.ArgumentParser(prog="quanta gateway", description=__doc__)
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
