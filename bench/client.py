"""Smart client benchmark: the SaGe paper's Table 3 shape, on the OPTIONAL workload.

    python bench/client.py [--dataset 1m|100k|10m] [--quanta 75,1000] [--block 100] [--limit N]

The workload is built as the paper builds it: each WatDiv basic query Q
with at least two triple patterns becomes (Q minus tp) OPTIONAL { tp }, tp
its triple pattern with the most matches (HDT's counts), unless the rest
would be a cross product. Each query runs to completion through a real
service (`quanta up`: Redis, 2 workers, the gateway, over HTTP) with the
smart client, OPTIONAL as the workers' LeftJoin, as OptJoin (one server query) and as BindLeftJoin
(blocks of `--block` mappings shipped as VALUES), at each quantum, in one
run: one service per quantum, each query run with every strategy. Per
query: requests sent (the on_request hook), bytes of the pages' bodies,
rows (which must agree across the four runs), wall time.

Writes bench/results/client.json, the `client` block of docs/benchmarks.md
and docs/img/client.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder

from quanta.client import Budgets
from quanta.engine.storage import open_store
from quanta.testkit.data import shared_dir
from quanta.testkit.workloads import optional_variant

REPO = Path(__file__).resolve().parent.parent
WATDIV = Path(os.environ.get("QUANTA_WATDIV", shared_dir() / "datasets" / "watdiv"))
RESULTS = REPO / "bench" / "results" / "client.json"
DOCS = REPO / "docs" / "benchmarks.md"
IMAGE = REPO / "docs" / "img" / "client.png"
STRATEGIES = {"LeftJoin": "server", "BindLeftJoin": "bind", "OptJoin": "auto"}


def counter(path: Path) -> Any:
    """Matches of one triple pattern, from the HDT file's own counts."""
    store = open_store(str(path), "count")

    def count(pattern: str) -> int:
        ids = []
        for term in pattern.rstrip(" .").split()[:3]:
            if term.startswith("?"):
                ids.append(0)
            else:
                gid = store.locate(term.strip("<>"))
                if gid <= 0:
                    return 0
                ids.append(gid)
        return int(store.estimate(*ids))

    return count


def workload(path: Path, sets: list[str], limit: int | None) -> dict[str, str]:
    """The OPTIONAL variants of the basic queries (and of the stress queries), by query name."""
    count = counter(path)
    queries: dict[str, str] = {}
    for folder in sets:
        for file in sorted((WATDIV / "queries" / folder).glob("*.rq"), key=_order):
            variant = optional_variant(file.read_text(), count)
            if variant is not None and variant not in queries.values():
                queries[file.stem] = variant
    return dict(list(queries.items())[:limit]) if limit else queries


def _order(path: Path) -> tuple[str, int]:
    template, number = path.stem.rsplit("_", 1)
    return template, int(number)


def template(name: str) -> str:
    """L1_3 -> L1; ST-p05-03_1 -> ST-p05 (stress queries by their number of triple patterns)."""
    return name.split("_")[0] if not name.startswith("ST-") else name[:6]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="10m", choices=["100k", "1m", "10m"])
    parser.add_argument("--workloads", default="basic,stress", help="WatDiv query sets: basic, stress")
    parser.add_argument("--quanta", default="75,1000", help="quanta in ms, comma-separated")
    parser.add_argument("--block", type=int, default=100, help="BindLeftJoin's mappings per request")
    parser.add_argument("--limit", type=int, help="the first N queries only (a quick look; docs untouched)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--timeout", type=float, default=120, help="seconds a query may take (else left out)")
    parser.add_argument("--render", type=Path, help="only rewrite the docs block and the plot from a saved result")
    args = parser.parse_args()
    if args.render:
        report = json.loads(args.render.read_text())
        benchlib.replace_block(DOCS, "client", render(report, report.get("argv", "")))
        plot(report)
        return 0
    dataset = WATDIV / f"watdiv-{args.dataset}.hdt"
    queries = workload(dataset, args.workloads.split(","), args.limit)
    quanta = [float(q) for q in args.quanta.split(",")]
    print(f"{len(queries)} OPTIONAL queries on watdiv-{args.dataset}, quanta {quanta} ms", file=sys.stderr)
    runs: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    timed_out: dict[str, str] = {}
    for quantum in quanta:
        with benchlib.quanta_up(dataset, workers=2, quantum_ms=quantum) as (url, _):
            for name, query in queries.items():
                if name in timed_out:
                    continue
                for label, strategy in STRATEGIES.items():
                    options = {"budgets": Budgets(block_size=args.block), "optional": strategy}
                    result = asyncio.run(benchlib.run_client(url, query, args.timeout, **options))
                    runs[f"{label}@{quantum:g}"][name] = result
                    print(f"{quantum:g} ms {label:12} {name:6} {result}", file=sys.stderr)
                    if "timeout_s" in result:
                        timed_out[name] = f"{label} at {quantum:g} ms: over {args.timeout:g} s ({result['rows']} rows)"
                        break
    for per in runs.values():  # a query over the time limit anywhere is left out everywhere
        for name in timed_out:
            per.pop(name, None)
    kept = [name for name in queries if name not in timed_out]
    mismatches = [name for name in kept if len({runs[config][name]["digest"] for config in runs}) != 1]
    report = {
        "machine": benchlib.machine({"quanta_client": "quanta-client"}),
        "argv": " ".join(sys.argv[1:]),
        "workloads": args.workloads.split(","),
        "dataset": f"watdiv-{args.dataset}",
        "block_size": args.block,
        "quanta_ms": quanta,
        "queries": {name: queries[name] for name in kept},
        "timed_out": timed_out,
        "runs": runs,
        "mismatches": mismatches,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    if mismatches:
        print(f"answers differ between runs: {mismatches}", file=sys.stderr)
        return 1
    if not args.limit:
        benchlib.replace_block(DOCS, "client", render(report, report["argv"]))
        plot(report)
    return 0


def totals(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {
        config: {
            "requests": sum(r["requests"] for r in per.values()),
            "bytes": sum(r["bytes"] for r in per.values()),
            "seconds": sum(r["seconds"] for r in per.values()),
        }
        for config, per in report["runs"].items()
    }


def render(report: dict[str, Any], argv: str) -> str:
    t = totals(report)
    m = report["machine"]
    n = len(report["queries"])
    strategies = _strategies(report)
    how = {
        "LeftJoin": "the workers' LeftJoin (in the server's piece)",
        "BindLeftJoin": f"BindLeftJoin (blocks of 8 mappings doubling up to {report['block_size']})",
        "OptJoin": "OptJoin (one server query)",
    }
    lines = [
        f"`python bench/client.py {argv}`".replace(" `", "`"),
        "",
        f"{n} OPTIONAL queries on {report['dataset']}: the WatDiv {' and '.join(report.get('workloads', ['basic']))} "
        f"queries, each with its triple pattern of most matches moved into an OPTIONAL, as the SaGe paper builds "
        f"them (those with one pattern, or whose rest would be a cross product, have no variant). Each ran to "
        f"completion through `quanta up` (Redis, 2 workers, the gateway, HTTP) with the smart client, OPTIONAL "
        f"as {', '.join(how[s] for s in strategies)}, one service per quantum. "
        f"Requests: all the client sent (the on_request hook), retries included; bytes: the pages' response "
        f"bodies. Every query gave the same rows in every run. {m['cpu']}, {m['nproc']} cores, "
        f"{m['date'][:10]}, commit {m['git_commit'][:10]}.",
        "",
        "| time quantum | " + " | ".join(f"{s} {what}" for what in ("requests", "MB", "s") for s in strategies) + " |",
        "|---|" + "---:|" * (3 * len(strategies)),
    ]
    for quantum in report["quanta_ms"]:
        per = [t[f"{s}@{quantum:g}"] for s in strategies]
        label = f"{quantum:g} ms" if quantum < 1000 else f"{quantum / 1000:g} s"
        cells = [f"{p['requests']:,.0f}" for p in per] + [f"{p['bytes'] / 1e6:,.1f}" for p in per]
        lines.append(f"| {label} | " + " | ".join(cells + [f"{p['seconds']:,.0f}" for p in per]) + " |")
    if report["timed_out"]:
        left = ", ".join(f"{name} ({why})" for name, why in report["timed_out"].items())
        lines += ["", f"Left out, over the time limit: {left}."]
    heavy = sorted(
        report["queries"], key=lambda q: -report["runs"][f"BindLeftJoin@{report['quanta_ms'][0]:g}"][q]["requests"]
    )[:6]
    lines += [
        "",
        "OptJoin sends one server query whatever the size of P1 (followed over its pages); BindLeftJoin one "
        "per block of P1's distinct join values, so it costs most where P1 is large (the queries below). "
        "OptJoin transfers more: P1's rows come back twice (alone, and within the join), which costs it "
        "pages where the answer is large (C3, ST-p05-06). A longer quantum changes little "
        "here, unlike the paper's 75 ms / 1 s contrast: a page also ends at about 1 MiB of JSON (or "
        "100,000 rows), so large answers take the same pages at either quantum, and most queries finish "
        "within one short quantum anyway. The paper's Table 3 (WatDiv 10M, 193 queries): BindLeftJoin "
        "72,489 / 70,964 requests, OptJoin 5,656 / 511, at 75 ms / 1 s.",
        "",
        "| query | rows | " + " | ".join(f"{c} requests" for c in report["runs"]) + " |",
        "|---|---:|" + "---:|" * len(report["runs"]),
    ]
    for q in heavy:
        cells = [f"{report['runs'][c][q]['requests']:,}" for c in report["runs"]]
        rows = report["runs"][f"OptJoin@{report['quanta_ms'][0]:g}"][q]["rows"]
        lines.append(f"| {q} | {rows:,} | " + " | ".join(cells) + " |")
    lines += ["", "Per template, requests (median over its queries):", ""]
    configs = list(report["runs"])
    lines += ["| template | " + " | ".join(configs) + " |", "|---|" + "---:|" * len(configs)]
    templates = list(dict.fromkeys(template(name) for name in report["queries"]))
    for group in templates:
        cells = []
        for config in configs:
            values = [r["requests"] for name, r in report["runs"][config].items() if template(name) == group]
            cells.append(f"{statistics.median(values):g}")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    lines += ["", "![requests per query, OptJoin against BindLeftJoin](img/client.png)"]
    return "\n".join(lines)


def _strategies(report: dict[str, Any]) -> list[str]:
    """The OPTIONAL strategies a report ran (an older one: OptJoin and BindLeftJoin only)."""
    return [s for s in STRATEGIES if f"{s}@{report['quanta_ms'][0]:g}" in report["runs"]]


def plot(report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["queries"])
    fig, axes = plt.subplots(1, len(report["quanta_ms"]), figsize=(12, 4), sharey=True)
    for ax, quantum in zip(axes, report["quanta_ms"], strict=True):
        for label, marker in zip(_strategies(report), "os^", strict=False):
            per = report["runs"][f"{label}@{quantum:g}"]
            ax.scatter(range(len(names)), [per[n]["requests"] for n in names], s=8, marker=marker, label=label)
        ax.set_yscale("log")
        ax.set_title(f"quantum {quantum:g} ms")
        ax.set_xlabel("query (WatDiv templates in order)")
    axes[0].set_ylabel("requests to complete")
    axes[0].legend()
    fig.tight_layout()
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMAGE, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
