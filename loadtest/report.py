"""The load-test report: tables and PNG plots from loadtest/results/*.json into the
`loadtest` block of docs/benchmarks.md (never edit that block by hand) and docs/img/loadtest-*.png.

    python loadtest/report.py
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import runner
from experiments import LIMITED

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOCS = HERE.parent / "docs"
IMG = DOCS / "img"
COMMANDS = {
    "wct": "python loadtest/experiments.py wct",
    "icwe": "python loadtest/experiments.py icwe",
    "qmph": "python loadtest/experiments.py qmph",
    "requests": "python loadtest/experiments.py requests",
    "quantum": "python loadtest/experiments.py quantum",
    "faults": "python loadtest/faults.py",
}
NAMES = {"quanta-75ms": "quanta 75 ms", "quanta-1s": "quanta 1 s", "quanta-fcfs": "quanta FCFS (∞)",
         "quanta-sparql": "quanta /sparql", "fuseki": "Fuseki", "fuseki-quota": "Fuseki + time limit",
         "virtuoso": "Virtuoso", "virtuoso-dbpedia": "Virtuoso as DBpedia"}  # fmt: skip
STYLE = {"quanta-75ms": "o-", "quanta-1s": "s-", "quanta-fcfs": "^-", "quanta-sparql": "v-", "fuseki": "x--",
         "fuseki-quota": "d--", "virtuoso": "+:", "virtuoso-dbpedia": "*:"}  # fmt: skip


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def provenance(data: dict[str, Any]) -> str:
    m = data["machine"]
    loads = [r["machine"]["load1_mean"] for r in data["runs"] if "machine" in r]
    steal = [r["machine"]["cpu_steal_pct"] for r in data["runs"] if "machine" in r]
    busy = (
        ""
        if not loads
        else (
            f"; load average during the runs {min(loads):.1f} to {max(loads):.1f} (mean {sum(loads) / len(loads):.1f}) "
            f"on {m['nproc']} cores, CPU stolen by the host up to {max(steal):.1f}%"
        )
    )
    return (f"`{COMMANDS[data['experiment']]}` on {m['date'][:10]}, git {m['git_commit'][:10]}"
            f"{' + local changes' if m.get('git_dirty') else ''}, {data.get('elapsed_min', '?')} min. "
            f"Machine: {m['cpu']}, {m['nproc']} cores, {m['memory_gb']} GB{busy}. "
            f"Raw results: `loadtest/results/{data['experiment']}.json`.")  # fmt: skip


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def by(runs: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r.get(k) for k in keys): r for r in runs}


def measured(data: dict[str, Any], point: str) -> tuple[dict[str, Any], list[str], dict[tuple[Any, ...], Any]]:
    """An experiment's config, the systems it ran (in the config's order), and its runs
    by (system, workers, `point`)."""
    runs, cfg = data["runs"], data["config"]
    systems = [s for s in cfg["systems"] if any(r["system"] == s for r in runs)]
    return cfg, systems, by(runs, "system", "workers", point)


def wct(data: dict[str, Any]) -> str:
    cfg, systems, index = measured(data, "n")
    out = [f"**Workload completion time and time for first results** (after *SaGe: Web Preemption for Public "
           f"SPARQL Query Services*, figures 8 to 10). {provenance(data)}",
           f"N clients start at once on watdiv-1m, each with a workload of its own ({cfg['rounds']} x one random "
           f"instance of each of the 20 basic templates, in its own order) and run it once. WCT: a client's first "
           f"query's start to its last query's end, averaged over the clients; TFR: a query's start to its first "
           f"row (or to its whole, empty, answer), averaged over the queries. The time limit of Fuseki + time limit "
           f"and Virtuoso as DBpedia is {cfg['quota_s']} s (Fuseki's `--timeout`, Virtuoso's MaxQueryExecutionTime, "
           f"with DBpedia's row cap, 10,000); cut: queries they stopped (an error, or an answer that ends properly "
           f"with fewer rows than expected: Fuseki closes a streamed TSV answer as if it were whole when its limit "
           f"strikes, Virtuoso answers what it found so far with 200 OK, so only the count check tells), complete: "
           f"rows received of rows expected. quanta 75 ms, 1 s and FCFS are the smart client over `/v1` "
           f"(QuantaUser, which decodes every page in the load generator); quanta /sparql and the peers, "
           f"SparqlUser (TSV)."]  # fmt: skip
    limited = [s for s in systems if s in LIMITED]
    for workers in cfg["workers"]:
        header = ["clients"] + [f"{NAMES[s]}: WCT s / TFR s" for s in systems]
        header += [f"{NAMES[s]}: cut / complete" for s in limited] + ["load"]
        rows = []
        for n in cfg["clients"]:
            row: list[Any] = [n]
            for s in systems:
                r = index.get((s, workers, n))
                bad = (
                    f" ({r['queries'] - r['ok']} not ok)" if r and r["ok"] != r["queries"] and s not in LIMITED else ""
                )
                row.append(f"{r['wct_s']:.2f} / {r['tfr_s']:.3f}{bad}" if r and r["tfr_s"] is not None else "")
            for s in limited:
                q = index.get((s, workers, n))
                row.append(f"{q['cut'] + q.get('partial', 0)} of {q['queries']} / {q['completeness']:.1%}" if q else "")
            loads = [index[(s, workers, n)]["machine"]["load1_mean"] for s in systems if (s, workers, n) in index]
            row.append(f"{min(loads):.1f}-{max(loads):.1f}" if loads else "")
            rows.append(row)
        label = f"{workers} worker{'s' if workers > 1 else ''} (peers: {workers} core{'s' if workers > 1 else ''})"
        out.append(f"*{label}*\n\n" + table(header, rows))
    out.append(_plot_wct(data, systems))
    return "\n\n".join(out)


def _plot_wct(data: dict[str, Any], systems: list[str]) -> str:
    cfg, index = data["config"], by(data["runs"], "system", "workers", "n")
    fig, axes = plt.subplots(2, len(cfg["workers"]), figsize=(5.5 * len(cfg["workers"]), 7), squeeze=False)
    for col, workers in enumerate(cfg["workers"]):
        for row, (key, title) in enumerate((("wct_s", "workload completion time (s)"),
                                            ("tfr_s", "time for first results (s)"))):  # fmt: skip
            ax = axes[row][col]
            for s in systems:
                points = [(n, index[(s, workers, n)][key]) for n in cfg["clients"] if (s, workers, n) in index]
                if points:
                    ax.plot(*zip(*points, strict=True), STYLE[s], label=NAMES[s])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("concurrent clients")
            ax.set_title(f"{title}, {workers} worker{'s' if workers > 1 else ''}", fontsize=9)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    return _save(fig, "loadtest-wct.png", "workload completion time and time for first results against clients")


def icwe(data: dict[str, Any]) -> str:
    cfg, systems, index = measured(data, "n")
    out = [f"**Throughput, timeouts and completeness under loaders** (after *SaGe: a preemptive SPARQL server for "
           f"online knowledge graphs*). {provenance(data)}",
           f"n-1 loaders run the heaviest 20% of the basic queries (40, by results.tsv's reference time) over and "
           f"over; one client runs its workload ({cfg.get('rounds', 3)} random instances of each of the 20 "
           f"templates, {20 * cfg.get('rounds', 3)} queries) once and is measured: queries per hour (its queries over "
           f"its completion time, "
           f"timeouts included), timeouts (every client gives up a query after {cfg['quota_s']} s; Fuseki + time "
           f"limit and Virtuoso as DBpedia also stop it themselves, silently cut answers counted), completeness "
           f"(rows received of rows expected). quanta 75 ms is the smart client over `/v1` (QuantaUser, which "
           f"decodes every page in the load generator); quanta /sparql and the peers, SparqlUser (TSV, rows counted "
           f"as they stream). Preemption overhead: "
           f"suspend + resume time per preempted quantum, from the workers' Prometheus histograms, as a share of "
           f"the 75 ms quantum."]  # fmt: skip
    for workers in cfg["workers"]:
        header = ["clients"] + [f"{NAMES[s]}: queries/h, timeouts, complete" for s in systems] + ["overhead", "load"]
        rows = []
        for n in cfg["clients"]:
            row: list[Any] = [n]
            for s in systems:
                r = index.get((s, workers, n))
                timeouts = r["cut"] + r.get("partial", 0) if r else 0  # cut with an error, or silently
                row.append(f"{r['qph']:,} / {timeouts} / {r['completeness']:.1%}" if r and r.get("qph") else "")
            o = (index.get(("quanta-75ms", workers, n)) or {}).get("overhead") or {}
            row.append(f"{o['suspend_resume_ms']} ms = {o['share_of_quantum']:.3%} ({o['preemptions']})"
                       if o.get("preemptions") else "")  # fmt: skip
            loads = [index[(s, workers, n)]["machine"]["load1_mean"] for s in systems if (s, workers, n) in index]
            row.append(f"{min(loads):.1f}-{max(loads):.1f}" if loads else "")
            rows.append(row)
        out.append(f"*{workers} worker{'s' if workers > 1 else ''}*\n\n" + table(header, rows))
    fig, ax = plt.subplots(figsize=(6, 4))
    for workers in cfg["workers"]:
        for s in systems:
            points = [
                (n, index[(s, workers, n)]["qph"]) for n in cfg["clients"] if index.get((s, workers, n), {}).get("qph")
            ]
            if points:
                ax.plot(
                    *zip(*points, strict=True),
                    STYLE[s],
                    label=f"{NAMES[s]}, {workers}w",
                    alpha=1 if workers == 1 else 0.5,
                )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("clients (1 measured, the rest loaders)")
    ax.set_ylabel("queries per hour (measured client)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    out.append(_save(fig, "loadtest-icwe.png", "queries per hour of the measured client against clients"))
    return "\n\n".join(out)


def qmph(data: dict[str, Any]) -> str:
    cfg, systems, index = measured(data, "users")
    out = [f"**Query mixes per hour** (the Berlin SPARQL Benchmark's measure, at its 1, 4, 8 and 64 clients). "
           f"{provenance(data)}",
           f"Each user loops over its own mix (one instance of each of the {data['runs'][0].get('mix', 20)} basic "
           f"templates, "
           f"in its own order) for {cfg['seconds']} s; QMpH = completed queries / mix size, per hour of run. Every "
           f"count checked. Locust CPU: the load generator's CPU time over the run's (one process: 100% is one core "
           f"saturated, and then it, not the service, bounds the figure)."]  # fmt: skip
    for workers in cfg["workers"]:
        header = ["users"] + [f"{NAMES[s]}: QMpH (Locust CPU)" for s in systems] + ["not ok", "load"]
        rows = []
        for u in cfg["users"]:
            rs = [index.get((s, workers, u)) for s in systems]
            bad = sum(r["queries"] - r["ok"] for r in rs if r)
            loads = [r["machine"]["load1_mean"] for r in rs if r]
            cells = [f"{r['qmph']:,.0f} ({r['locust_cpu_s'] / r['wall_s']:.0%})" if r else "" for r in rs]
            rows.append([u, *cells, bad, f"{min(loads):.1f}-{max(loads):.1f}" if loads else ""])
        out.append(f"*{workers} worker{'s' if workers > 1 else ''} (peers: {workers} cores)*\n\n" + table(header, rows))
    fig, ax = plt.subplots(figsize=(6, 4))
    for workers in cfg["workers"]:
        for s in systems:
            points = [(u, index[(s, workers, u)]["qmph"]) for u in cfg["users"] if (s, workers, u) in index]
            if points:
                ax.plot(*zip(*points, strict=True), STYLE[s], label=f"{NAMES[s]}, {workers}w")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("users")
    ax.set_ylabel("query mixes per hour")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    out.append(_save(fig, "loadtest-qmph.png", "query mixes per hour against users"))
    return "\n\n".join(out)


def requests(data: dict[str, Any]) -> str:
    runs = data["runs"]
    out = [
        f"**Requests and data transfer per query** (after the WWW'19 paper's Table 3). {provenance(data)}",
        "One client runs a whole workload alone (basic: the 200 queries; OPTIONAL: the 150 basic queries whose "
        "largest triple pattern moves into an OPTIONAL, the paper's protocol), through the smart client at a "
        "75 ms and a 1 s quantum, OPTIONAL by the workers' LeftJoin, by OptJoin (one query) and by "
        "BindLeftJoin (bound blocks); Fuseki "
        "answers each query in one request (TSV). Plan bytes: saved plans carried back and forth by value.",
    ]
    header = ["system", "workload", "OPTIONAL by", "queries", "requests", "requests/query", "KB/query", "plan KB",
              "all counts right"]  # fmt: skip
    strategy = {"server": "LeftJoin (workers)", "auto": "OptJoin", "bind": "BindLeftJoin"}
    rows = [[NAMES[r["system"]], r["workload"], strategy.get(r["optional"] or "", ""), r["queries"], r["requests"],
             r["requests_per_query"], r["kb_per_query"], round(r["plan_bytes"] / 1024, 1),
             "yes" if r["ok"] == r["queries"] else f"no ({r['queries'] - r['ok']})"] for r in runs]  # fmt: skip
    out.append(table(header, rows))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{NAMES[r['system']]}\n{r['workload']} {strategy.get(r['optional'] or '', '')}" for r in runs]
    ax.bar(range(len(runs)), [r["requests_per_query"] for r in runs], color="tab:blue")
    ax.set_xticks(range(len(runs)), labels, fontsize=6)
    ax.set_ylabel("requests per query")
    ax.grid(axis="y", alpha=0.3)
    out.append(_save(fig, "loadtest-requests.png", "requests per query"))
    return "\n\n".join(out)


def quantum(data: dict[str, Any]) -> str:
    out = [f"**Choosing the quantum** (the ICWE paper's rule: 80% of the queries finish within one quantum). "
           f"{provenance(data)}",
           "One client runs the whole workload alone on a service with an infinite quantum (after a warm-up pass); "
           "a query's execution time is its workers' time (parse, resume, quantum, suspend, over its pages). "
           "`python loadtest/quantum.py --log FILE` computes it from any run's query log, `--metrics URL...` from "
           "workers' `quanta_quantum_seconds` histograms."]  # fmt: skip
    header = ["workload", "queries", "80% within (the quantum)", "p50", "p90", "p95", "max", "within 75 ms"]
    rows = []
    for r in data["runs"]:
        p = r["percentiles_ms"]
        rows.append([r["workload"], r["queries"], f"**{r['quantum_ms']} ms**", p["p50"], p["p90"], p["p95"],
                     p["p100"], f"{r['within_75ms']:.1%}"])  # fmt: skip
    out.append(table(header, rows))
    basic = next((r for r in data["runs"] if r["workload"] == "basic"), None)
    if basic:
        templates = sorted(basic["by_template_p80_ms"].items(), key=lambda kv: -kv[1])
        out.append("Per template (basic, p80 of its instances, ms): " + ", ".join(f"{k} {v}" for k, v in templates))
    return "\n\n".join(out)


def faults(data: dict[str, Any]) -> str:
    runs = data["runs"]
    first = runs[0]
    out = [f"**Faults under load.** {provenance(data)}",
           f"{first['users']} users ({first['users'] // 2} QuantaUser: the smart client over `/v1`; "
           f"{first['users'] // 2} SparqlUser: `/sparql`) loop over their basic workloads for {first['seconds']} s "
           f"against a service with {first['workers']} workers and a 75 ms quantum; the fault comes "
           f"{first['fault_at_s']} s in. Lost: queries a client gave up after its retries; wrong: a row count other "
           f"than results.tsv's; retried: requests that failed and were sent again; longest pause: the longest time "
           f"no query of that client class completed, in the 30 s after the fault and before it; degraded: from the "
           f"fault until completions per second are back to half their rate before it (3 s window). Redis keeps an "
           f"append-only file, as the chart runs it, except in `redis-reference-volatile`. `virtuoso`: the same "
           f"number of users, all SparqlUser, against Virtuoso (no limits), whose server is killed (SIGKILL) and "
           f"started again on its database, as a supervisor would; SparqlUser resends what never reached the "
           f"server, as it does for quanta, not what was cut once begun."]  # fmt: skip
    header = ["fault", "down (s)", "client", "queries", "completed", "wrong", "lost", "errors seen (retried)",
              "longest pause: after / before (s)", "degraded (s)", "slowest across the fault (s)", "p99 before (s)",
              "load"]  # fmt: skip
    rows = []
    for r in runs:
        for user, c in r["clients"].items():
            seen = ", ".join(f"{k} {v}" for k, v in c["retried_errors"].items()) or "none"
            if c["lost_errors"]:
                seen += "; gave up: " + ", ".join(f"{k} {v}" for k, v in c["lost_errors"].items())
            paused = f"{c['pause_s']} / {c['pause_before_s']}" if "pause_s" in c else ""
            rows.append([r["fault"], r["restart_s"], user, c["queries"], c["completed"], c["wrong"], c["lost"], seen,
                         paused, c["degraded_s"], c["slowest_overlapping_s"], c["p99_before_s"],
                         r["machine"]["load1_mean"]])  # fmt: skip
    out.append(table(header, rows))
    return "\n\n".join(out)


SECTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "wct": wct, "icwe": icwe, "qmph": qmph, "requests": requests, "quantum": quantum, "faults": faults,
}  # fmt: skip


def _save(fig: Any, name: str, alt: str) -> str:
    fig.tight_layout()
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / name, dpi=110)
    plt.close(fig)
    return f"![{alt}](img/{name})"


def main() -> None:
    global RESULTS, IMG
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the results are (default %(default)s)")
    parser.add_argument("--doc", type=Path, default=DOCS / "benchmarks.md", help="the document (images: its img/)")
    args = parser.parse_args()
    RESULTS, IMG = args.results, args.doc.parent / "img"
    parts = []
    for name, render in SECTIONS.items():
        data = load(name)
        if data is not None and data["runs"]:
            parts.append(render(data))
    body = "\n\n".join(parts) or "No load-test results yet: run the experiments (loadtest/README.md)."
    if not args.doc.exists():
        args.doc.write_text("# Benchmarks\n")
    runner.replace_block(args.doc, "loadtest", body)
    print(f"wrote the loadtest block of {args.doc} ({len(parts)} sections)")


if __name__ == "__main__":
    main()
