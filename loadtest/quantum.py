"""Choosing the quantum: the ICWE 2018 SaGe paper (after Silberschatz's rule of thumb for
round robin) sets it so that 80% of the queries finish within one quantum; then most queries
never pay for a suspension, and only the long ones are preempted.

    python loadtest/quantum.py --log run.queries.jsonl     # from a workload run's query log
    python loadtest/quantum.py --metrics http://worker:9100/metrics ...   # from workers' histograms
    python loadtest/quantum.py --run [--hdt watdiv-1m.hdt] [--workload basic]   # run the mix, then compute

From a query log, a query's execution time is what the workers spent on it (parse, resume,
quantum, suspend, summed over its pages: `service_ms`), so the run should be made on a
service with an infinite quantum (`--run` does that: one client, the whole mix, alone). From
the workers' `quanta_quantum_seconds` histograms the figure is per quantum, interpolated
within buckets: read them from a service with an infinite quantum too, where a query is a
quantum (pages end at the byte budget as well, so large answers count as several).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

SHARE = 0.8


def quantile(values: list[float], q: float) -> float:
    """The smallest value at or under which a share q of `values` lie."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def from_log(queries: list[dict[str, Any]], share: float = SHARE) -> dict[str, Any]:
    """The quantum under which `share` of the queries finish, from their workers' time."""
    times = [q["service_ms"] for q in queries if q["status"] == "ok"]
    if not times:
        raise ValueError("no completed query in the log")
    return {
        "source": "query log",
        "queries": len(times),
        "quantum_ms": round(quantile(times, share), 3),
        "share": share,
        "percentiles_ms": {f"p{int(q * 100)}": round(quantile(times, q), 3) for q in (0.5, 0.8, 0.9, 0.95, 0.99, 1.0)},
        "within_75ms": round(sum(t <= 75 for t in times) / len(times), 3),
        "by_template_p80_ms": _by_template(queries),
    }


def _by_template(queries: list[dict[str, Any]]) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for q in queries:
        if q["status"] == "ok":
            groups.setdefault(q["name"], []).append(q["service_ms"])
    return {name: round(quantile(times, SHARE), 3) for name, times in sorted(groups.items())}


_BUCKET = re.compile(r"^quanta_quantum_seconds_bucket\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)


def from_metrics(texts: list[str], share: float = SHARE) -> dict[str, Any]:
    """The quantum under which `share` of the quanta ran, from the workers' Prometheus text
    (their `quanta_quantum_seconds` buckets summed), by linear interpolation in the bucket."""
    buckets: dict[float, float] = {}
    for text in texts:
        for match in _BUCKET.finditer(text):
            le = re.search(r'le="([^"]+)"', match["labels"])
            if le:
                bound = float("inf") if le[1] == "+Inf" else float(le[1])
                buckets[bound] = buckets.get(bound, 0.0) + float(match["value"])
    if not buckets or buckets.get(float("inf"), 0) == 0:
        raise ValueError("no quanta_quantum_seconds observations")
    total = buckets[float("inf")]
    target = share * total
    lower, below = 0.0, 0.0
    for bound in sorted(buckets):
        count = buckets[bound]
        if count >= target:
            if bound == float("inf"):
                quantum_s = lower
            else:
                quantum_s = lower + (bound - lower) * (target - below) / max(count - below, 1e-9)
            return {"source": "worker histograms", "quanta": int(total), "quantum_ms": round(quantum_s * 1000, 3),
                    "share": share, "bucket_ms": [lower * 1000, bound * 1000]}  # fmt: skip
        lower, below = bound, count
    raise AssertionError("unreachable")


def run_mix(hdt: Path, mix: str, out: Path) -> list[dict[str, Any]]:
    """The whole mix once, one client alone, on a service with an infinite quantum."""
    import runner
    import service

    with service.quanta(hdt, workers=1, quantum_ms=float("inf")) as svc:
        # one warm-up pass (the parse cache, the page cache), then the measured one
        runner.locust(svc.url, "QuantaUser", 1, out, "warmup", "--workload", mix, "--rounds", "0", "--passes", "1")
        run = runner.locust(
            svc.url, "QuantaUser", 1, out, "quantum", "--workload", mix, "--rounds", "0", "--passes", "1"
        )
    bad = [q for q in run.queries if q["status"] != "ok"]
    if bad or not run.queries:
        raise RuntimeError(f"{len(bad)} queries failed or were wrong: {bad[:3]}")
    return run.queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--log", type=Path, help="a query log (locustfile's --query-log)")
    source.add_argument("--metrics", nargs="+", help="workers' /metrics URLs or files")
    source.add_argument("--run", action="store_true", help="run the mix on a service with an infinite quantum")
    parser.add_argument("--hdt", type=Path, help="--run: the dataset (default: watdiv-1m.hdt of the WatDiv folder)")
    parser.add_argument("--workload", default="basic", help="--run: the mix (default basic)")
    parser.add_argument("--share", type=float, default=SHARE)
    args = parser.parse_args()
    if args.log:
        result = from_log([json.loads(line) for line in args.log.read_text().splitlines()], args.share)
    elif args.metrics:
        texts = []
        for where in args.metrics:
            if where.startswith("http"):
                with urllib.request.urlopen(where, timeout=10) as response:
                    texts.append(response.read().decode())
            else:
                texts.append(Path(where).read_text())
        result = from_metrics(texts, args.share)
    else:
        import workload

        hdt = args.hdt or workload.watdiv_dir() / "watdiv-1m.hdt"
        queries = run_mix(hdt, args.workload, Path(tempfile.mkdtemp(prefix="quanta-quantum-")))
        result = from_log(queries, args.share) | {"dataset": hdt.name, "workload": args.workload}
    json.dump(result, sys.stdout, indent=1)
    print(f"\n{args.share:.0%} of the queries finish within {result['quantum_ms']} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
