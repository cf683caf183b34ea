"""`quanta query`: run a query in-process exactly as workers do. After each
quantum the plan is suspended, serialized, parsed back from the bytes and
resumed, so every run exercises Resume(Suspend(P)) = P."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from quanta.engine.execute import QuantumPage, execute
from quanta.engine.plan import ASK
from quanta.engine.storage import BACKENDS, RETIRED_BACKENDS, open_store
from quanta.sparql.errors import QuantaError, QuerySyntaxError
from quanta.sparql.results import FORMATS, write

DEFAULT_QUANTUM_MS = 75.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, metavar="FILE.hdt", help="HDT file to query")
    parser.add_argument(
        "--quantum-ms",
        default=str(DEFAULT_QUANTUM_MS),
        metavar="N|inf",
        help="time quantum (default 75; inf: never suspend)",
    )
    parser.add_argument("--format", choices=sorted(FORMATS), default="json", help="SPARQL 1.1 result format")
    parser.add_argument("--stats", metavar="FILE", help="write execution statistics as JSON")
    # Retired backends stay valid choices, so scripts written for them keep running: the store
    # opened is the native one (same files, same ids), with a warning (quanta.engine.storage).
    parser.add_argument(
        "--backend",
        choices=(*BACKENDS, *RETIRED_BACKENDS),
        help="storage backend: native, the only one (default: $QUANTA_BACKEND, else native;"
        " pyhdt is retired: accepted, runs on the native store, with a warning)",
    )
    parser.add_argument("query", help="query text, or @FILE.rq")


def run(args: argparse.Namespace) -> int:
    try:
        quantum = _quantum_seconds(args.quantum_ms)
        text = _read(args.query[1:]) if args.query.startswith("@") else args.query
        store = open_store(args.dataset, backend=args.backend)
        started = time.perf_counter()
        pages = list(run_to_completion(store, text, quantum))
        total_ms = (time.perf_counter() - started) * 1000
    except QuerySyntaxError as error:
        print(f"quanta query: {error}", file=sys.stderr)
        return 2
    except (QuantaError, OSError, ValueError) as error:
        print(f"quanta query: {error}", file=sys.stderr)
        return 1
    last = pages[-1]
    rows = [row for page in pages for row in page.rows]
    boolean = bool(rows) if last.form == ASK else None
    sys.stdout.write(write(args.format, last.head, rows, boolean))
    if args.stats:
        with open(args.stats, "w") as f:  # open, not pathlib: its import costs a fresh process several ms
            f.write(json.dumps(summarize(pages, total_ms), indent=2) + "\n")
    return 0


def run_to_completion(store, text: str, quantum_seconds: float | None):  # type: ignore[no-untyped-def]
    """Pages of one query, each quantum resumed from the previous one's bytes."""
    page = execute(store, query=text, quantum_seconds=quantum_seconds)
    yield page
    while page.next is not None:
        page = execute(store, saved=page.next, quantum_seconds=quantum_seconds)
        yield page


def summarize(pages: list[QuantumPage], total_ms: float) -> dict[str, object]:
    suspended = [p.stats for p in pages if p.next is not None]
    resumed = [p.stats for p in pages[1:]]
    return {
        "quanta": len(pages),
        "results": sum(len(p.rows) for p in pages),
        "total_ms": round(total_ms, 3),
        "parse_ms": round(pages[0].stats.parse_ms, 3),
        "suspend_ms": distribution([s.suspend_ms for s in suspended]),
        "resume_ms": distribution([s.resume_ms for s in resumed]),
        "plan_bytes": distribution([s.plan_bytes for s in suspended]),
        "overshoot_ms": distribution([s.overshoot_ms for s in suspended]),
    }


def distribution(values: list[float]) -> dict[str, float]:
    """p50/p99/max/mean (nearest-rank percentiles); zeros when empty."""
    if not values:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]

    return {
        "p50": round(rank(0.50), 4),
        "p99": round(rank(0.99), 4),
        "max": round(ordered[-1], 4),
        "mean": round(math.fsum(ordered) / len(ordered), 4),  # statistics.fmean, without its import
    }


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _quantum_seconds(text: str) -> float | None:
    if text.lower() in ("inf", "infinity"):
        return None
    value = float(text)
    if value <= 0:
        raise ValueError("--quantum-ms must be positive or 'inf'")
    return value / 1000
