"""A query in a process of its own (issue 18): `quanta query` against pyoxigraph, each
started fresh for every one of the 200 WatDiv basic queries on watdiv-100k, side by side.

    python bench/fresh.py [--runs 3] [--as-called]

quanta reads the HDT file and its side index (`quanta query --dataset FILE @QUERY`, SPARQL
JSON on stdout); pyoxigraph opens a RocksDB store loaded once beforehand, read-only, and
writes the same results as SPARQL JSON. Each figure is the best of `runs` wall times of one
process (start, imports, open, query, results written), the two alternated query by query.
Both run with Python's bytecode cache in effect, as any installation has it after its first
run: a PYTHONDONTWRITEBYTECODE in the caller's environment (this repository's sandboxes set
it) would have every start compile each module's source again (`--as-called` keeps the
caller's environment as it is).
The figure of merit is the geometric mean over the queries of quanta's time over
pyoxigraph's. Writes bench/results/fresh.json and the `fresh` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder

from quanta.testkit.data import shared_dir

WATDIV = shared_dir() / "datasets" / "watdiv"
QUANTA = [str(Path(sys.executable).with_name("quanta")), "query"]  # the console script a user runs
OXIGRAPH = """
import sys, pyoxigraph as ox
store = ox.Store.read_only(sys.argv[1])
sys.stdout.buffer.write(store.query(open(sys.argv[2]).read()).serialize(format=ox.QueryResultsFormat.JSON))
"""


def wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def cached(pycache: Path) -> dict[str, str]:
    """The measured processes' environment: bytecode written on first import and read after
    (under `pycache`, so neither the checkout nor the venv gets new files)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--as-called", action="store_true", help="the caller's environment, bytecode cache or not")
    args = parser.parse_args()
    machine = benchlib.machine({"pyoxigraph": "pyoxigraph"})  # before the runs: its load average is the start's
    queries = sorted((WATDIV / "queries" / "basic").glob("*.rq"))
    with tempfile.TemporaryDirectory() as work:
        hdt = Path(work) / "watdiv-100k.hdt"  # a copy: the store writes its side index beside it
        shutil.copy(WATDIV / hdt.name, hdt)
        env = dict(os.environ) if args.as_called else cached(Path(work) / "pycache")
        import pyoxigraph as ox

        store = ox.Store(str(Path(work) / "oxigraph"))
        with gzip.open(WATDIV / "watdiv-100k.nt.gz") as data:
            store.bulk_load(data.read(), ox.RdfFormat.N_TRIPLES)
        store.flush()
        del store  # one writer at a time: the read-only opens below
        ours = [*QUANTA, "--dataset", str(hdt)]
        theirs = [sys.executable, "-c", OXIGRAPH, str(Path(work) / "oxigraph")]
        wall([*ours, "ASK {}"], env)  # builds the side index; both runs cache the bytecode they import
        wall([*theirs, str(queries[0])], env)
        times: dict[str, list[float]] = {"quanta": [], "pyoxigraph": []}
        for query in queries:
            best = {"quanta": math.inf, "pyoxigraph": math.inf}
            for _ in range(args.runs):
                best["quanta"] = min(best["quanta"], wall([*ours, f"@{query}"], env))
                best["pyoxigraph"] = min(best["pyoxigraph"], wall([*theirs, str(query)], env))
            for name, seconds in best.items():
                times[name].append(seconds * 1000)
    ratios = [q / o for q, o in zip(times["quanta"], times["pyoxigraph"], strict=True)]
    result: dict[str, Any] = {
        "machine": machine,
        "runs": args.runs,
        "as_called": args.as_called,
        "bytecode_cached": not env.get("PYTHONDONTWRITEBYTECODE"),
        "queries": [q.stem for q in queries],
        "ms": times,
        "quanta": benchlib.percentiles(times["quanta"]),
        "pyoxigraph": benchlib.percentiles(times["pyoxigraph"]),
        "ratio_geomean": round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3),
        "ratio": benchlib.percentiles(ratios),
    }
    out = benchlib.REPO / "bench" / "results" / "fresh.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "queries", "ms")}, indent=1))
    render(result)


def render(result: dict[str, Any]) -> None:
    m = result["machine"]

    def row(label: str, key: str) -> str:
        p = result[key]
        return f"| {label} | {p['p50']} | {p['p99']} | {p['max']} | {p['mean']} |"

    flags = f"--runs {result['runs']}{' --as-called' if result['as_called'] else ''}"
    cache = (
        "bytecode cached, as after a first run" if result["bytecode_cached"] else "every start compiling its modules"
    )
    body = "\n".join(
        [
            f"Produced by `python bench/fresh.py {flags}` on {m['date'][:10]} "
            f"(git {m['git_commit'][:10]}{' + local changes' if m['git_dirty'] else ''}; {m['nproc']} cores, "
            f"load average at start {m['load_average_at_start'][0]}; pyoxigraph {m['pyoxigraph']}): "
            f"the {len(result['queries'])} WatDiv basic queries on watdiv-100k, one fresh process per query "
            f"({cache}), the best of the runs of each, ms. Raw figures: `bench/results/fresh.json`.",
            "",
            f"**Geometric mean of quanta's time over pyoxigraph's: {result['ratio_geomean']}** (the issue's "
            "target: 3 or less).",
            "",
            "| one process per query | p50 | p99 | max | mean |",
            "|---|---|---|---|---|",
            row("`quanta query --dataset watdiv-100k.hdt` (ms)", "quanta"),
            row("pyoxigraph, its store opened read-only (ms)", "pyoxigraph"),
            row("quanta / pyoxigraph, per query", "ratio"),
        ]
    )
    benchlib.replace_block(benchlib.REPO / "docs" / "benchmarks.md", "fresh", body)


if __name__ == "__main__":
    main()
