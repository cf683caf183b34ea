"""The papers' experiments as commands, each a series of real Locust runs against real
services on this machine (loadtest/service.py), results in loadtest/results/NAME.json
(`python loadtest/report.py` turns them into docs/benchmarks.md's load-test section).

    python loadtest/experiments.py wct       # WWW'19 figs. 8-10: completion and first results vs clients
    python loadtest/experiments.py icwe      # ICWE'18: loaders on the heaviest 20%, one measured client
    python loadtest/experiments.py qmph      # query mixes per hour at 1, 4, 8, 64 users
    python loadtest/experiments.py requests  # WWW'19 Table 3: requests and bytes per query
    python loadtest/experiments.py quantum   # the quantum under which 80% of queries finish
    (--quick: a short version of each, to check the command; results to /tmp)

Systems: quanta with a 75 ms and a 1 s quantum and first come, first served (an infinite
quantum, one page per query), through the smart client (QuantaUser); Apache Jena Fuseki in
memory, with no limit and with a query time limit (the quota baseline), and Virtuoso, with no
limit and as DBpedia runs it (a row cap of 10,000 and the time limit), through SparqlUser.
"1 worker / 2 workers": quanta's worker processes; a peer's threads pinned to 1 or 2 cores.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import quantum as choose
import runner
import service
import workload

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
INF = float("inf")
QUANTA_SYSTEMS = {"quanta-75ms": 75.0, "quanta-1s": 1000.0, "quanta-fcfs": INF}
FUSEKI_SYSTEMS = ("fuseki", "fuseki-quota")
VIRTUOSO_SYSTEMS = ("virtuoso", "virtuoso-dbpedia")
LIMITED = ("fuseki-quota", "virtuoso-dbpedia")  # the systems that cut queries: the quota baselines
DBPEDIA_ROWS = 10_000  # DBpedia's ResultSetMaxRows
WARMUP = Path("/tmp/quanta-loadtest/runs/warmup")


def summarize(run: runner.Run) -> dict[str, Any]:
    """One run's figures: workload completion time per client (first query's start to last
    query's end), time for first results per query (to the first row, or to the complete empty
    answer), outcomes, completeness (rows received of rows expected), requests and bytes."""
    queries = run.measured()
    clients: dict[int, list[dict[str, Any]]] = {}
    for q in queries:
        clients.setdefault(q["client"], []).append(q)
    wct = [max(q["started"] + q["total_s"] for q in qs) - min(q["started"] for q in qs) for qs in clients.values()]
    # a query's first row, or its whole answer when it has none (cut queries count with their first row)
    tfr = [q["first_s"] if q["first_s"] is not None else q["total_s"] for q in queries
           if q["first_s"] is not None or q["status"] == "ok"]  # fmt: skip
    expected = [q for q in queries if q["expected"]]
    outcomes = {s: sum(q["status"] == s for q in queries) for s in ("ok", "wrong", "cut", "failed")}
    return {
        "label": run.label,
        "clients": len(clients),
        "queries": len(queries),
        **outcomes,
        # answers that ended cleanly with fewer rows than expected: cut short by a time limit without
        # a sign (Fuseki ends a streamed TSV answer properly when its time limit strikes)
        "partial": sum(q["status"] == "wrong" and q["rows"] < (q["expected"] or 0) for q in queries),
        "wct_s": round(fmean(wct), 3) if wct else None,
        "wct_max_s": round(max(wct), 3) if wct else None,
        "tfr_s": round(fmean(tfr), 4) if tfr else None,
        "tfr_p95_s": round(choose.quantile(tfr, 0.95), 4) if tfr else None,
        "completion_s": round(fmean(q["total_s"] for q in queries), 4) if queries else None,
        "completeness": round(
            sum(min(q["rows"], q["expected"]) for q in expected) / max(1, sum(q["expected"] for q in expected)), 4
        ),
        "requests": sum(q["requests"] for q in queries),
        "bytes": sum(q["bytes"] for q in queries),
        "plan_bytes": sum(q.get("plan_bytes", 0) for q in queries),
        "wall_s": run.wall_s,
        "locust_cpu_s": run.locust_cpu_s,
        "counts": run.counts,
        "machine": run.machine,
        "returncode": run.returncode,
    }


class Results:
    """loadtest/results/NAME.json, rewritten after every run (a long experiment cut short
    keeps what it measured)."""

    def __init__(self, name: str, quick: bool, config: dict[str, Any]) -> None:
        folder = Path("/tmp/quanta-loadtest/results") if quick else RESULTS
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{name}.json"
        self.data: dict[str, Any] = {"experiment": name, "quick": quick, "config": config,
                                     "machine": runner.machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                     "runs": []}  # fmt: skip
        self.out = Path(f"/tmp/quanta-loadtest/runs/{name}")

    def add(self, entry: dict[str, Any]) -> None:
        self.data["runs"].append(entry)
        self.data["elapsed_min"] = round((time.time() - self._t0) / 60, 1)
        self.path.write_text(json.dumps(self.data, indent=1) + "\n")
        keys = ("system", "workers", "users", "clients", "queries", "ok", "cut", "wct_s", "tfr_s", "completeness")
        shown = {k: entry[k] for k in (*keys, "qmph", "requests") if k in entry}
        print(json.dumps(shown | {"load": entry["machine"]["load1_mean"]}), flush=True)

    def __enter__(self) -> Results:
        self._t0 = time.time()
        return self

    def __exit__(self, *_: object) -> None:
        self.data["elapsed_min"] = round((time.time() - self._t0) / 60, 1)
        self.path.write_text(json.dumps(self.data, indent=1) + "\n")
        print(f"results: {self.path}")


@dataclass
class System:
    host: str
    user: str  # the Locust user class
    options: list[str]  # its extra locust options
    quanta: service.Quanta | None = None  # for the workers' metrics


@contextmanager
def systems(names: list[str], workers: int, quota_s: float) -> Iterator[dict[str, System]]:
    """Every system named, up at once (idle ones cost nothing), by name."""
    hdt = workload.watdiv_dir() / "watdiv-1m.hdt"
    with ExitStack() as stack:
        up: dict[str, System] = {}
        for name in names:
            if name in QUANTA_SYSTEMS:
                svc = stack.enter_context(service.quanta(hdt, workers=workers, quantum_ms=QUANTA_SYSTEMS[name]))
                up[name] = System(svc.url, "QuantaUser", [], svc)
            elif name == "quanta-sparql":  # the SPARQL endpoint of a quanta at 75 ms
                svc = stack.enter_context(service.quanta(hdt, workers=workers))
                up[name] = System(svc.url, "SparqlUser", [], svc)
            elif name in (*FUSEKI_SYSTEMS, *VIRTUOSO_SYSTEMS):
                server = _peer(name, quota_s)
                server.pin(workers)
                endpoint = "/watdiv/sparql" if name in FUSEKI_SYSTEMS else "/sparql"
                up[name] = System(server.url, "SparqlUser", ["--endpoint", endpoint])
            else:
                raise ValueError(f"unknown system {name!r}")
        for name, s in up.items():  # a warm-up pass each (Fuseki's JIT, parse caches, page cache), not recorded
            runner.locust(s.host, s.user, 1, WARMUP, name, "--passes", "1", *s.options)
        yield up


def side_by_side(args: argparse.Namespace, points: list[int], tag: str) -> Iterator[tuple[int, int, str, System, str]]:
    """For each worker count (every system up at once) and each point (clients or users), every
    system in turn: (workers, point, system name, system, the run's label)."""
    for workers in args.workers:
        with systems(args.systems, workers, args.quota_s) as up:
            for point in points:
                for name, s in up.items():
                    yield workers, point, name, s, f"{name}-w{workers}-{tag}{point}"


_PEERS: dict[tuple[str, float], service.Peer] = {}


def _peer(name: str, quota_s: float) -> service.Peer:
    """A peer's server, one per system and time limit for the whole experiment (Fuseki takes ~30 s
    to load watdiv-1m, Virtuoso ~20 s)."""
    if (name, quota_s) not in _PEERS:
        data = workload.watdiv_dir() / "watdiv-1m.nt.gz"
        if name in FUSEKI_SYSTEMS:
            server = service.fuseki(data, timeout_s=quota_s if name in LIMITED else None)
        else:
            limited = name in LIMITED
            server = service.virtuoso(
                data,
                max_rows=DBPEDIA_ROWS if limited else None,
                max_seconds=max(1, round(quota_s)) if limited else None,
            )
        _PEERS[(name, quota_s)] = _STACK.enter_context(server)
    return _PEERS[(name, quota_s)]


_STACK = ExitStack()


def wct(args: argparse.Namespace) -> None:
    """WWW'19 figures 8 to 10: N clients start at once, each with its own workload (one
    instance of each basic template per round, in its own order), each runs it once."""
    config = {"clients": args.clients, "workers": args.workers, "systems": args.systems, "rounds": args.rounds,
              "quota_s": args.quota_s, "dataset": "watdiv-1m", "workload": "basic"}  # fmt: skip
    with Results("wct", args.quick, config) as results:
        for workers, n, name, s, label in side_by_side(args, args.clients, "n"):
            run = runner.locust(s.host, s.user, n, results.out, label, "--workload", "basic", "--rounds",
                                str(args.rounds), "--passes", "1", *s.options)  # fmt: skip
            results.add({"system": name, "workers": workers, "n": n} | summarize(run))


def icwe(args: argparse.Namespace) -> None:
    """ICWE'18: n-1 loaders run the heaviest 20% of the basic queries (by the reference time
    in results.tsv) over and over while one client runs its workload (--rounds instances of
    each template) once and is measured. Every
    client gives up a query after --quota-s (the paper's 120 s, scaled); the Fuseki quota
    cuts it server-side."""
    config = {"clients": args.clients, "workers": args.workers, "systems": args.systems, "quota_s": args.quota_s,
              "rounds": args.rounds, "dataset": "watdiv-1m", "workload": "basic"}  # fmt: skip
    with Results("icwe", args.quick, config) as results:
        for workers, n, name, s, label in side_by_side(args, args.clients, "n"):
            before = s.quanta.worker_metrics() if s.quanta else []
            options = ["--workload", "basic", "--rounds", str(args.rounds), "--measure-one"]
            options += ["--query-timeout", str(args.quota_s)]
            run = runner.locust(s.host, s.user, n, results.out, label, *options, *s.options)
            entry: dict[str, Any] = {"system": name, "workers": workers, "n": n} | summarize(run)
            m = entry["queries"]
            entry["timeouts"] = entry["cut"]
            entry["qph"] = round(m / max(entry["wct_s"] or 1e-9, 1e-9) * 3600) if m else None
            after = s.quanta.worker_metrics() if s.quanta else []
            entry["overhead"] = _overhead(before, after, QUANTA_SYSTEMS.get(name))
            results.add(entry)


def _overhead(before: list[str], after: list[str], quantum_ms: float | None) -> dict[str, Any] | None:
    """Preemption overhead from the workers' Prometheus histograms: suspend + resume time per
    preempted quantum, and as a share of the quantum."""
    if not after or not quantum_ms or quantum_ms == INF:
        return None

    def total(texts: list[str], metric: str) -> float:
        return sum(float(line.split()[-1]) for t in texts for line in t.splitlines() if line.startswith(metric))

    def delta(metric: str) -> float:
        return total(after, metric) - total(before, metric)

    suspended = delta("quanta_suspend_seconds_count")
    resumed = delta("quanta_resume_seconds_count")
    if not suspended:
        return {"preemptions": 0}
    per_preemption = (delta("quanta_suspend_seconds_sum") + delta("quanta_resume_seconds_sum")) / suspended
    return {
        "preemptions": int(suspended),
        "resumes": int(resumed),
        "quanta": int(delta("quanta_quantum_seconds_count")),
        "suspend_resume_ms": round(per_preemption * 1000, 4),
        "share_of_quantum": round(per_preemption * 1000 / quantum_ms, 6),
    }


def qmph(args: argparse.Namespace) -> None:
    """Query mixes per hour (the Berlin SPARQL Benchmark's measure): U users each loop over
    their own mix (one instance of each basic template) for --seconds; QMpH = completed
    queries / mix size, per hour of run."""
    config = {"users": args.users, "workers": args.workers, "systems": args.systems, "seconds": args.seconds,
              "dataset": "watdiv-1m", "workload": "basic"}  # fmt: skip
    mix = len({q.name for q in workload.basic(workload.watdiv_dir())})
    with Results("qmph", args.quick, config) as results:
        for workers, users, name, s, label in side_by_side(args, args.users, "u"):
            run = runner.locust(s.host, s.user, users, results.out, label, "--workload", "basic",
                                *s.options, run_time=f"{args.seconds}s")  # fmt: skip
            entry = {"system": name, "workers": workers, "users": users} | summarize(run)
            done = [q for q in run.queries if q["status"] == "ok"]
            ends = [q["started"] + q["total_s"] for q in run.queries]
            span = max(ends) - min(q["started"] for q in run.queries) if ends else 1.0
            entry["qmph"] = round(len(done) / mix / span * 3600, 1)
            entry["mix"] = mix
            results.add(entry)


def requests_per_query(args: argparse.Namespace) -> None:
    """WWW'19 Table 3: one client runs a whole workload alone; requests and bytes per query at
    75 ms and 1 s, OPTIONAL by OptJoin and by BindLeftJoin; a SPARQL endpoint sends one each."""
    config = {"quanta": ["quanta-75ms", "quanta-1s"], "workloads": ["basic", "optional"], "dataset": "watdiv-1m"}
    with (
        Results("requests", args.quick, config) as results,
        systems(["quanta-75ms", "quanta-1s", "fuseki"], 1, args.quota_s) as up,
    ):
        for mix in ("basic", "optional"):
            for name, s in up.items():
                for strategy in ("server", "auto", "bind") if mix == "optional" and s.user == "QuantaUser" else ("",):
                    label = f"{name}-{mix}{'-' + strategy if strategy else ''}"
                    options = ["--workload", mix, "--rounds", "1" if args.quick else "0", "--passes", "1"]
                    options += ["--optional", strategy] if strategy else []
                    run = runner.locust(s.host, s.user, 1, results.out, label, *options, *s.options)
                    entry = {"system": name, "workload": mix, "optional": strategy or None} | summarize(run)
                    q = max(1, entry["queries"])
                    entry["requests_per_query"] = round(entry["requests"] / q, 2)
                    entry["kb_per_query"] = round(entry["bytes"] / q / 1024, 2)
                    results.add(entry)


def quantum(args: argparse.Namespace) -> None:
    """The quantum under which 80% of the basic queries finish on watdiv-1m (loadtest/quantum.py)."""
    hdt = workload.watdiv_dir() / "watdiv-1m.hdt"
    with Results("quantum", args.quick, {"dataset": "watdiv-1m", "workloads": ["basic", "optional"]}) as results:
        for mix in ("basic", "optional"):
            with runner.LoadSampler() as sampler:
                queries = choose.run_mix(hdt, mix, results.out / mix)
            results.add({"workload": mix, "machine": sampler.summary} | choose.from_log(queries))


def resummarize(name: str) -> None:
    """Recompute each run's figures of loadtest/results/NAME.json from its query log (kept in
    /tmp/quanta-loadtest/runs/NAME), after a change of what summarize() computes."""
    path = RESULTS / f"{name}.json"
    data = json.loads(path.read_text())
    for entry in data["runs"]:
        log = Path(f"/tmp/quanta-loadtest/runs/{name}/{entry['label']}.queries.jsonl")
        if "label" in entry and log.exists():
            queries = [json.loads(line) for line in log.read_text().splitlines()]
            run = runner.Run(entry["label"], entry["wall_s"], queries, entry["counts"], entry["machine"],
                             entry["locust_cpu_s"], entry["returncode"])  # fmt: skip
            entry.update(summarize(run))
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"recomputed {path}")


COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "wct": wct, "icwe": icwe, "qmph": qmph, "requests": requests_per_query, "quantum": quantum,
}  # fmt: skip


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what was started (the `with` blocks)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=COMMANDS)
    parser.add_argument("--quick", action="store_true", help="a short run to check the command (results in /tmp)")
    parser.add_argument("--resummarize", action="store_true", help="only recompute the figures from the query logs")
    parser.add_argument("--clients", type=_ints, default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--users", type=_ints, default=[1, 4, 8, 64])
    parser.add_argument("--workers", type=_ints, default=[1, 2])
    parser.add_argument("--systems", type=lambda s: s.split(","), default=None)
    parser.add_argument(
        "--rounds",
        type=int,
        help="wct, icwe: each template this many times in a (measured) client's workload (default: wct 1, icwe 3)",
    )
    parser.add_argument("--seconds", type=int, default=30, help="qmph: each run's duration")
    parser.add_argument("--quota-s", type=float, default=5.0, help="the time limit of the quota baselines")
    args = parser.parse_args()
    defaults = {"wct": [*QUANTA_SYSTEMS, "quanta-sparql", *FUSEKI_SYSTEMS, *VIRTUOSO_SYSTEMS],
                "icwe": ["quanta-75ms", "quanta-sparql", *FUSEKI_SYSTEMS, *VIRTUOSO_SYSTEMS],
                "qmph": ["quanta-75ms", "quanta-sparql", "fuseki", "virtuoso"]}  # fmt: skip
    args.systems = args.systems or defaults.get(args.experiment, [])
    args.rounds = args.rounds or {"icwe": 3}.get(args.experiment, 1)
    if args.quick:
        args.clients, args.users, args.workers, args.rounds, args.seconds = [1, 4], [1, 4], [1], 1, 8
    if args.resummarize:
        resummarize(args.experiment)
        return
    with _STACK:
        COMMANDS[args.experiment](args)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


if __name__ == "__main__":
    main()
