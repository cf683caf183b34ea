"""FILTERs over the friendOf/likes join on watdiv-1m (509,125 rows before the filter), in
process at an infinite quantum, two ways side by side in one run:

- *native*: the condition evaluated natively (src/expr.rs), inside the native plan;
- *Python filter*: the same native plan, its comparisons of ids native, the rest of the
  condition decided by the Python test for every row (what a FILTER costs whose
  function the native evaluator lacks).

    python bench/filters.py [--runs 3]

Rows per CPU second count the join's rows, the filter's input. Writes
bench/results/filters.json and the `filters` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder

from quanta.engine.operators import expression
from quanta.engine.storage import open_store
from quanta.testkit.data import shared_dir

W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
JOIN = f"?u <{W}friendOf> ?f . ?f <{W}likes> ?p"
QUERIES = {
    "none (the join alone)": "",
    '`?u != ?f && REGEX(STR(?p), "Product[0-9]*7$")`': '?u != ?f && REGEX(STR(?p), "Product[0-9]*7$")',
    '`STR(?p) > "…Product5" && REGEX(STR(?u), "User[0-9]*7$")`': (
        f'STR(?p) > "{W}Product5" && REGEX(STR(?u), "User[0-9]*7$")'
    ),
    '`STR(?u) < STR(?f) && REGEX(STR(?p), "7$")`': 'STR(?u) < STR(?f) && REGEX(STR(?p), "7$")',
}
RESULTS = Path(__file__).parent / "results" / "filters.json"
DOC = Path(__file__).parent.parent / "docs" / "benchmarks.md"


def timed(store: Any, query: str, runs: int) -> tuple[int, float]:
    """(rows out, median CPU seconds) of `runs` runs."""
    rows, _, cpus = benchlib.run_whole(store, query, runs)
    return rows, statistics.median(cpus)


def atoms_only(op: Any) -> Any:
    """A FILTER's comparisons of ids natively, the rest by the Python test for every row."""
    split = ORIGINAL(op)
    return split if split is None or split[1] is None else None


ORIGINAL = expression.split_condition


def measure(store: Any, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    join_rows = 0
    for name, condition in QUERIES.items():
        query = f"SELECT * WHERE {{ {JOIN} {f'FILTER({condition})' if condition else ''} }}"
        figures: dict[str, Any] = {}
        for mode in ("native", "Python filter"):
            expression.split_condition = atoms_only if mode == "Python filter" else ORIGINAL
            rows, cpu = timed(store, query, runs)
            join_rows = join_rows or rows
            figures[mode] = {"rows": rows, "cpu_s": round(cpu, 4), "input_rows_per_s": round(join_rows / cpu)}
            print(f"{name}, {mode}: {rows:,} rows, {join_rows / cpu / 1e6:.2f} M input rows/s", file=sys.stderr)
        expression.split_condition = ORIGINAL
        assert len({f["rows"] for f in figures.values()}) == 1, f"{name}: the modes differ"
        out[name] = figures
    return out


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"Produced by `python bench/filters.py{r['argv']}` on {m['date'][:10]} (git {m['git_commit'][:10]}"
        f"{' + local changes' if m['git_dirty'] else ''}; {m['nproc']} cores, load average at start "
        f"{m['load_average_at_start'][0]}). Raw figures: `bench/results/filters.json`.",
        "",
        "**FILTERs over the join** `?u wsdbm:friendOf ?f . ?f wsdbm:likes ?p` on watdiv-1m, the engine's "
        f"`run()` at an infinite quantum (median of {r['runs']}): millions of the join's rows (the filter's "
        "input) per CPU second, and the rows that pass.",
        "",
        "| FILTER | rows out | native | Python filter | native / Python filter |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, f in r["filters"].items():
        rate = {mode: f[mode]["input_rows_per_s"] / 1e6 for mode in f}
        if name == next(iter(QUERIES)):  # no filter: the two modes are one
            lines.append(f"| {name} | {f['native']['rows']:,} | {rate['native']:.2f} M | - | - |")
            continue
        lines.append(
            f"| {name} | {f['native']['rows']:,} | {rate['native']:.2f} M | {rate['Python filter']:.2f} M | "
            f"{rate['native'] / rate['Python filter']:.1f}x |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    source = shared_dir() / "datasets" / "watdiv" / "watdiv-1m.hdt"
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / source.name  # the native store writes its side index beside the file
        shutil.copy(source, copy)
        store = open_store(str(copy), name="watdiv-1m")
        r = {
            "argv": "".join(f" {a}" for a in sys.argv[1:]),
            "machine": benchlib.machine({"quanta_native": "quanta-native"}),
            "runs": args.runs,
            "filters": measure(store, args.runs),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(r, indent=1) + "\n")
    benchlib.replace_block(DOC, "filters", render(r))
    print(render(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
