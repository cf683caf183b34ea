"""Faults under load: a sustained Locust run (QuantaUser and SparqlUser, half each, every
query's count checked against results.tsv) against a quanta service on watdiv-1m, and one
fault in the middle of it. Results in loadtest/results/faults.json.

    python loadtest/faults.py [--users 64] [--seconds 60] [--at 20] [--faults worker,gateway,redis,redis-reference]

- worker: SIGKILL a worker mid-quantum (another takes its place at once, as a Deployment's would);
- gateway: SIGTERM the only gateway and start it again (requests in flight are cut);
- redis: SIGTERM Redis and start it again from its append-only file (as the chart runs it),
  saved plans by value;
- redis-reference: the same with saved plans kept in Redis by reference;
- redis-reference-volatile: plans by reference, and a Redis that keeps nothing (no append-only
  file): what the persistence is for;
- virtuoso: the counterpart on a peer: the same users, all SparqlUser, against Virtuoso (no limits),
  whose server is killed (SIGKILL) and started again on its database, as a supervisor would.

Per run and client class: queries completed, wrong (row count differs from results.tsv), lost
(the client gave up: an error it did not retry past), the errors clients saw (requests that
failed and were resent, by kind), the longest pause in completions after the fault (against the
longest one before it), how long the service was degraded (from the fault until the rate of
completed queries is back to half its rate before the fault, over 3 s), and the slowest query
that overlapped the fault.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean
from typing import Any

import runner
import service
import workload

HERE = Path(__file__).resolve().parent
FAULTS = ("worker", "gateway", "redis", "redis-reference", "redis-reference-volatile", "virtuoso")


def inject(svc: service.Quanta, fault: str) -> None:
    if fault == "worker":
        svc.kill_worker(0)
    elif fault == "gateway":
        svc.restart_gateway()
    elif fault.startswith("redis"):
        svc.restart_redis()
    else:
        raise ValueError(fault)


def analyse(queries: list[dict[str, Any]], fault_t: float, back_t: float) -> dict[str, Any]:
    """What clients saw, per user class."""
    out: dict[str, Any] = {}
    for user in sorted({q["user"] for q in queries}):
        mine = [q for q in queries if q["user"] == user]
        ends = [q["started"] + q["total_s"] for q in mine]
        overlapping = [q for q, end in zip(mine, ends, strict=True) if q["started"] <= back_t and end >= fault_t]
        errors: Counter[str] = Counter()
        for q in mine:
            errors.update(q["errors"])
        lost = [q for q in mine if q["status"] in ("failed", "cut")]
        before = [q["total_s"] for q, end in zip(mine, ends, strict=True) if end < fault_t]
        out[user] = {
            "queries": len(mine),
            "completed": sum(q["status"] == "ok" for q in mine),
            "wrong": sum(q["status"] == "wrong" for q in mine),
            "lost": len(lost),
            "lost_errors": dict(Counter(q["error"].split(":", 1)[0] for q in lost)),
            "retried_errors": dict(errors),
            "in_flight_at_fault": sum(q["started"] <= fault_t <= end for q, end in zip(mine, ends, strict=True)),
            "slowest_overlapping_s": round(max((q["total_s"] for q in overlapping), default=0.0), 2),
            "p99_before_s": round(sorted(before)[int(0.99 * (len(before) - 1))], 2) if before else None,
            "degraded_s": degraded(ends, queries[0]["started"] if queries else fault_t, fault_t),
            "pause_s": pause(ends, fault_t, fault_t + 30),
            "pause_before_s": pause(ends, min(q["started"] for q in mine) + 5, fault_t),
        }
    return out


def pause(ends: list[float], start: float, stop: float) -> float:
    """The longest time in [start, stop) during which no query of these clients completed."""
    marks = sorted([start, *(e for e in ends if start <= e < stop), min(stop, max(ends, default=stop))])
    return round(max((b - a for a, b in itertools.pairwise(marks)), default=0.0), 2)


def degraded(ends: list[float], start: float, fault_t: float, window: int = 3) -> float | None:
    """Seconds from the fault until completions per second are back to half their mean before
    it (after a 5 s ramp-up), sustained over `window` seconds; None if they never are."""
    before = [e for e in ends if start + 5 <= e < fault_t]
    if not before or fault_t - start <= 5:
        return None
    rate = len(before) / (fault_t - start - 5)
    last = max(ends)
    t = fault_t
    while t + window <= last:
        if sum(t <= e < t + window for e in ends) >= 0.5 * rate * window:
            return round(t - fault_t, 1)
        t += 0.5
    return None


@contextmanager
def target(
    fault: str, args: argparse.Namespace, plan: str | None, persistent: bool | None
) -> Iterator[tuple[str, list[str], Callable[[], None]]]:
    """What `fault` hits: the service's URL, the Locust users and their options, and the fault."""
    if plan is None or persistent is None:  # a peer
        with service.virtuoso(workload.watdiv_dir() / "watdiv-1m.nt.gz") as peer:
            assert peer.restart is not None
            yield peer.url, ["--endpoint", "/sparql", "SparqlUser"], peer.restart
        return
    hdt = workload.watdiv_dir() / "watdiv-1m.hdt"
    with service.quanta(hdt, workers=args.workers, quantum_ms=75, plan_mode=plan, appendonly=persistent) as svc:
        yield svc.url, ["--plan", plan, "QuantaUser", "SparqlUser"], lambda: inject(svc, fault)


def run_fault(fault: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    peer = fault == "virtuoso"
    plan = None if peer else "reference" if fault.startswith("redis-reference") else "value"
    persistent = None if peer else not fault.endswith("volatile")  # Redis's append-only file
    with target(fault, args, plan, persistent) as (url, users, hit):
        log, counts = out / f"{fault}.queries.jsonl", out / f"{fault}.counts.json"
        log.unlink(missing_ok=True)
        command = [*runner.LOCUST, "--host", url, "--headless", "-u", str(args.users), "-r", str(args.users)]
        command += ["--run-time", f"{args.seconds}s", "--stop-timeout", "30", "--csv", str(out / fault)]
        command += ["--only-summary"]
        command += ["--query-log", str(log), "--counts-out", str(counts), "--workload", "basic", *users]
        with runner.LoadSampler() as sampler, (out / f"{fault}.locust.log").open("w") as output:
            locust = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
            started = time.time()
            time.sleep(args.at)
            fault_t = time.time()
            hit()
            back_t = time.time()  # the part is back (the gateway ready, Redis answering; Virtuoso answering)
            locust.wait(timeout=args.seconds + 120)
        queries = [json.loads(line) for line in log.read_text().splitlines()]
    return {
        "fault": fault,
        "plan": plan,
        "redis_aof": persistent,
        "users": args.users,
        "workers": args.workers,
        "seconds": args.seconds,
        "fault_at_s": round(fault_t - started, 1),
        "fault_epoch": fault_t,
        "back_epoch": back_t,
        "restart_s": round(back_t - fault_t, 2),
        "clients": analyse(queries, fault_t, back_t),
        "counts": json.loads(counts.read_text()) if counts.exists() else {},
        "locust_returncode": locust.returncode,
        "machine": sampler.summary,
        "mean_completion_s": round(fmean(q["total_s"] for q in queries), 3) if queries else None,
    }


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what was started (the `with` blocks)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--at", type=float, default=20, help="the fault, this many seconds into the run")
    parser.add_argument("--faults", type=lambda s: s.split(","), default=list(FAULTS))
    parser.add_argument("--quick", action="store_true", help="8 users, 20 s, results in /tmp")
    args = parser.parse_args()
    if args.quick:
        args.users, args.seconds, args.at = 8, 20, 8
    results = Path("/tmp/quanta-loadtest/results") if args.quick else HERE / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = Path("/tmp/quanta-loadtest/runs/faults")
    out.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"experiment": "faults", "quick": args.quick, "machine": runner.machine(), "runs": []}
    path = results / "faults.json"
    if args.faults != list(FAULTS) and path.exists():  # some faults again: keep the others' runs
        data["runs"] = [r for r in json.loads(path.read_text())["runs"] if r["fault"] not in args.faults]
    started = time.monotonic()
    for fault in args.faults:
        entry = run_fault(fault, args, out)
        data["runs"].append(entry)
        data["runs"].sort(key=lambda r: FAULTS.index(r["fault"]))
        data["elapsed_min"] = round((time.monotonic() - started) / 60, 1)  # this invocation's faults
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(json.dumps({"fault": fault, "restart_s": entry["restart_s"], **entry["clients"]}), flush=True)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
