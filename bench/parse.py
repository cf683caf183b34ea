"""What reading a query costs (issue 18): the 200 WatDiv basic queries, in process, through
Oxigraph's spargebra alone (the native core), through `quanta.sparql.parse.read` (spargebra,
the translation into the planner's tree and the server fragment's refusals), through the
engine's whole compile (parse and physical plan, the process's plan caches cleared), and
through rdflib's parseQuery + translateQuery (the parser quanta used before), side by side.

    python bench/parse.py [--runs 5]

Each figure is the best of `runs` timings of one query (ms); the distribution is over the
queries. Writes bench/results/parse.json and the `parse` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery

from quanta.engine import plan as plan_module
from quanta.engine.planning.compile import compile_query
from quanta.engine.storage import open_store
from quanta.native import _core
from quanta.sparql.parse import read
from quanta.testkit.data import shared_dir

WATDIV = shared_dir() / "datasets" / "watdiv"


def best_ms(call: Callable[[], object], runs: int, before: Callable[[], None] | None = None) -> float:
    best = float("inf")
    for _ in range(runs):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def forget_plans() -> None:
    """The process never saw the query: no pooled operator tree, no parsed static plan."""
    plan_module.POOL.free.clear()
    plan_module._physical_plan.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    texts = [p.read_text() for p in sorted((WATDIV / "queries" / "basic").glob("*.rq"))]
    hdt = Path(tempfile.gettempdir()) / "quanta-bench" / "watdiv-100k.hdt"
    if not hdt.exists():  # a copy: its side index is written beside it
        hdt.parent.mkdir(exist_ok=True)
        shutil.copy(WATDIV / hdt.name, hdt)
    store = open_store(str(hdt))
    ways: dict[str, Callable[[str], object]] = {
        "spargebra": _core.parse_query,
        "read": read,
        "compile": lambda q: compile_query(q, store),
        "rdflib": lambda q: translateQuery(parseQuery(q)),
    }
    result: dict[str, Any] = {"machine": benchlib.machine({"rdflib": "rdflib"}), "queries": len(texts)}
    for name, way in ways.items():
        before = forget_plans if name == "compile" else None
        runs = 1 if name == "rdflib" else args.runs  # 200 x 5 ms: once is enough to see it
        times = [best_ms(partial(way, q), runs, before) for q in texts]
        result[name] = benchlib.percentiles(times)
    out = benchlib.REPO / "bench" / "results" / "parse.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    render(result)


def render(result: dict[str, Any]) -> None:
    def row(label: str, key: str) -> str:
        p = result[key]
        return f"| {label} | {p['p50']} | {p['p99']} | {p['max']} | {p['mean']} |"

    m = result["machine"]
    body = "\n".join(
        [
            f"Produced by `python bench/parse.py` on {m['date'][:10]} (git {m['git_commit'][:10]}), "
            f"{m['nproc']} cores, load average at start {m['load_average_at_start'][0]}; "
            f"the {result['queries']} WatDiv basic queries, in process, ms (the best of several runs of each query).",
            "",
            "| reading a query | p50 | p99 | max | mean |",
            "|---|---|---|---|---|",
            row("spargebra alone (native core)", "spargebra"),
            row("`quanta.sparql.parse.read`: spargebra + the planner's tree + the fragment's refusals", "read"),
            row("the engine's compile: parse + physical plan, plan caches cleared", "compile"),
            row(f"rdflib {m['rdflib']} parseQuery + translateQuery (the parser before)", "rdflib"),
        ]
    )
    benchlib.replace_block(benchlib.REPO / "docs" / "benchmarks.md", "parse", body)


if __name__ == "__main__":
    main()
