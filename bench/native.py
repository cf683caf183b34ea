"""Native storage and execution core (issue 13): every figure the issue lists.
The storage-level ones (opening, memory, resuming a scan) set the native store
beside pyHDT's reading of the same file (`storage.hdt.HdtStore`, the reference);
the engine runs only on the native store, so the others measure it alone.

    python bench/native.py [--data DIR] [--quick] [--out FILE] [--render FILE.json] [--today DIR]

(1) opening a dataset with its side index present, and the private memory a
second worker adds on the same file; (2) resuming a scan of every pattern
shape at offsets 0 to 10^7; (3) the friendOf/likes join in rows per second;
(4) suspend + resume in situ at a 75 ms quantum; (5) where a page's time
goes; (6) the 200 basic WatDiv queries over HTTP (`quanta up`, one worker,
75 ms quantum), sequentially and with 4 clients (with --today, the service
before the native core runs beside it: the issue's "today"). Writes
bench/results/native.json and the `native` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder

from quanta.testkit.data import shared_dir

REPO = benchlib.REPO
RESULTS = REPO / "bench" / "results" / "native.json"
DOC = REPO / "docs" / "benchmarks.md"
WORK = Path(os.environ.get("QUANTA_BENCH_DIR", "/tmp/quanta-bench"))
STORES = ("native", "pyhdt")  # storage-level sections: the native store and pyHDT, the reference
W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
JOIN = f"SELECT * WHERE {{ ?u <{W}friendOf> ?f . ?f <{W}likes> ?p }}"
C3 = "C3_1.rq"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def prepared(data: Path, name: str) -> Path:
    """A private copy of a shared HDT file (the native store and pyHDT both
    write a side index beside it) with the metadata `quanta load` writes, so
    opening it skips hashing the file, as for a loaded dataset."""
    target = WORK / "native" / f"{name}.hdt"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data / f"{name}.hdt", target)
    meta = Path(str(target) + ".meta.json")
    if not meta.exists():
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        meta.write_text(json.dumps({"version_id": digest[:32]}))
    for store in STORES:
        open_reading(target, store)  # builds each side index once
    return target


def open_reading(path: Path, store: str) -> Any:
    """The native store over the file, or pyHDT's reading of it (`pyhdt`: a
    storage-level reference only, the engine does not run on it)."""
    if store == "pyhdt":
        from quanta.engine.storage.hdt import HdtStore

        return HdtStore(str(path))
    from quanta.engine.storage import open_store

    return open_store(str(path))


# -- (1) opening, memory ----------------------------------------------------------------

# the store's modules are imported first: opening is what a worker pays per dataset
OPENER = """
if sys.argv[2] == "native":
    import quanta.engine.storage.native
    from quanta.engine.storage import open_store
else:
    from quanta.engine.storage.hdt import HdtStore as open_store
"""

OPEN = (
    """
import json, sys, time
"""
    + OPENER
    + """
start = time.perf_counter()
store = open_store(sys.argv[1])
print(json.dumps({"open_ms": (time.perf_counter() - start) * 1000}))
"""
)

WORKER = (
    r"""
import json, sys
def private():
    out = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out["Private_Clean"] + out["Private_Dirty"], out["Rss"]
"""
    + OPENER
    + r"""
for _ in range(3):
    sum(1 for _ in range(100000))
before, _ = private()
store = open_store(sys.argv[1])
opened, _ = private()
n = sum(1 for _ in store.search(0, 0, 0))
for o in range(1, store.nb_subjects, 97):
    n += sum(1 for _ in store.search(0, 0, o))
after, rss = private()
print(json.dumps({"opened": opened - before, "after_scan": after - before, "rss": rss}))
sys.stdout.flush()
if len(sys.argv) > 3:
    sys.stdin.readline()
"""
)


def opening(path: Path, repeats: int, stores: tuple[str, ...] = STORES) -> dict[str, Any]:
    """Open time in a fresh process, and the private memory of a first and a second worker
    that have read every triple (the second one's is what an extra worker costs)."""
    out: dict[str, Any] = {"file_bytes": path.stat().st_size}
    for backend in stores:
        times = []
        for _ in range(repeats):
            proc = subprocess.run([sys.executable, "-c", OPEN, str(path), backend], capture_output=True, text=True)
            times.append(json.loads(proc.stdout.strip().splitlines()[-1])["open_ms"])
        first = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), backend, "hold"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert first.stdout is not None and first.stdin is not None
        first_report = json.loads(first.stdout.readline())
        second = subprocess.run(
            [sys.executable, "-c", WORKER, str(path), backend], capture_output=True, text=True, check=True
        )
        first.stdin.write("\n")
        first.stdin.close()
        first.wait()
        report = json.loads(second.stdout.strip().splitlines()[-1])
        index = Path(str(path) + (".quanta-index.v1" if backend == "native" else ".index.v1-1"))
        out[backend] = {
            "open_ms": benchlib.percentiles(times, digits=4),
            "index_bytes": index.stat().st_size if index.exists() else 0,
            "first_worker_private_bytes": first_report["after_scan"],
            "second_worker_private_bytes": report["after_scan"],
            "second_worker_private_after_open_bytes": report["opened"],
        }
        log(
            f"  open {backend}: {out[backend]['open_ms']['p50']:.2f} ms, "
            f"second worker +{report['after_scan'] >> 10} KiB"
        )
    return out


# -- (2) resume per shape ----------------------------------------------------------------


def shapes(store: Any, samples: int = 3000, seed: int = 1) -> dict[str, tuple[int, int, int]]:
    """For each shape, the pattern with most matches among those of sampled triples."""
    rng = random.Random(seed)
    picked = [next(iter(store.search(0, 0, 0, rng.randrange(store.triples)))) for _ in range(samples)]
    best: dict[str, tuple[int, tuple[int, int, int]]] = {"???": (store.triples, (0, 0, 0))}
    for s, p, o in picked:
        for shape, pattern in (
            ("S??", (s, 0, 0)),
            ("SP?", (s, p, 0)),
            ("SPO", (s, p, o)),
            ("?P?", (0, p, 0)),
            ("?PO", (0, p, o)),
            ("??O", (0, 0, o)),
            ("S?O", (s, 0, o)),
        ):
            if shape in ("?P?", "??O", "?PO") or shape not in best:
                n = store.estimate(*pattern)
                if shape not in best or n > best[shape][0]:
                    best[shape] = (n, pattern)
    return {shape: pattern for shape, (_, pattern) in best.items()}


def time_first(store: Any, pattern: tuple[int, int, int], offset: int, repeats: int) -> float:
    """Median µs of search(pattern, offset) to its first triple."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        next(iter(store.search(*pattern, offset)), None)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def resume_costs(path: Path, quick: bool) -> dict[str, Any]:
    stores = {b: open_reading(path, b) for b in STORES}
    patterns = shapes(stores["pyhdt"])
    out: dict[str, Any] = {}
    for shape, pattern in patterns.items():
        count = stores["pyhdt"].estimate(*pattern)
        row: dict[str, Any] = {"pattern": pattern, "matches": count}
        offsets = [0] + [10**k for k in range(2, 8) if 10**k < count]
        if count > 1 and count - 1 not in offsets:
            offsets.append(count - 1)
        for backend, store in stores.items():
            row[backend] = {}
            for offset in offsets:
                slow = backend == "pyhdt" and shape == "?P?" and offset >= 10**6
                repeats = 3 if slow else (5 if quick else 21)
                row[backend][str(offset)] = round(time_first(store, pattern, offset, repeats), 2)
        out[shape] = row
        log(
            f"  resume {shape}: native {max(row['native'].values()):.2f} µs at most, "
            f"pyHDT {max(row['pyhdt'].values()):.1f}"
        )
    return out


# -- (3) join rows per second -------------------------------------------------------------


def join_rate(path: Path, repeats: int) -> dict[str, Any]:
    from quanta.engine.storage import open_store

    rows, walls, cpus = benchlib.run_whole(open_store(str(path)), JOIN, repeats)
    out = {
        "native": {
            "rows": rows,
            "rows_per_s_wall": round(rows / statistics.median(walls)),
            "rows_per_s_cpu": round(rows / statistics.median(cpus)),
        }
    }
    log(f"  join native: {out['native']['rows_per_s_cpu'] / 1e6:.2f} M rows/s (CPU)")
    return out


# -- (4) suspend + resume in situ -------------------------------------------------------


def suspend_resume(path: Path, queries: list[str], max_quanta: int) -> dict[str, Any]:
    """Every basic and stress query through execute() at a 75 ms quantum with
    the service's page budget (1 MiB of JSON, 100,000 rows), each page resumed
    from the previous one's bytes in this process (a worker's warm pool)."""
    from quanta.engine.execute import execute, warm_up
    from quanta.engine.storage import open_store

    store = open_store(str(path))
    warm_up(store)  # as a worker does: the first plan saved in a process imports protobuf (~90 ms)
    sr, suspend, resume, plan_bytes, quantum = [], [], [], [], []
    pages = 0
    for text in queries:
        page = execute(store, query=text, quantum_seconds=0.075, max_results=100_000, max_bytes=1 << 20)
        page.bindings_json()
        n = 1
        while page.next is not None and n < max_quanta:
            previous = page.stats
            page = execute(store, saved=page.next, quantum_seconds=0.075, max_results=100_000, max_bytes=1 << 20)
            page.bindings_json()
            sr.append(previous.suspend_ms + page.stats.resume_ms)
            suspend.append(previous.suspend_ms)
            resume.append(page.stats.resume_ms)
            plan_bytes.append(previous.plan_bytes)
            quantum.append(page.stats.quantum_ms)
            n += 1
        pages += n
    out = {
        "native": {
            "pages": pages,
            "suspend_plus_resume_ms": benchlib.percentiles(sr, digits=4),
            "suspend_ms": benchlib.percentiles(suspend, digits=4),
            "resume_ms": benchlib.percentiles(resume, digits=4),
            "plan_bytes": benchlib.percentiles([float(b) for b in plan_bytes], digits=4),
            "quantum_ms": benchlib.percentiles(quantum, digits=4),
        }
    }
    log(f"  suspend+resume native: {out['native']['suspend_plus_resume_ms']}")
    return out


# -- (5) where a page's time goes ---------------------------------------------------------


def page_profile(path: Path, query: str, repeats: int) -> dict[str, Any]:
    from quanta.engine.execute import edge, run
    from quanta.engine.plan import Plan
    from quanta.engine.planning.compile import compile_query
    from quanta.engine.quantum import Quantum
    from quanta.engine.storage import open_store
    from quanta.sparql.results import rows_text

    out: dict[str, Any] = {}
    store = open_store(str(path))
    for label, max_results, max_bytes in (("2,000 rows", 2000, None), ("1 MiB page", None, 1 << 20)):
        plan = compile_query(query, store)
        quantum = Quantum(0.075)
        plan.ctx.quantum = quantum
        run(plan, quantum, max_results=10)
        saved = plan.save()
        parts: dict[str, list[float]] = {k: [] for k in ("resume", "run", "suspend", "decode", "json", "native_json")}
        rows_n = []
        for _ in range(repeats):  # each from the same state: 10 rows into the query
            gc.disable()
            t0 = time.perf_counter()
            quantum = Quantum(0.075)
            plan = Plan.load(saved, store, quantum)
            t1 = time.perf_counter()
            rows, _ = run(plan, quantum, max_results, max_bytes)
            t2 = time.perf_counter()
            nxt = plan.save()
            t3 = time.perf_counter()
            head, decoder, renderer = edge(plan)
            strings = decoder(rows)
            t4 = time.perf_counter()
            rows_text("json", head, strings)
            t5 = time.perf_counter()
            if renderer is not None:
                renderer("json", rows)
            t6 = time.perf_counter()
            plan.release()
            gc.enable()
            for key, value in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5), strict=True):
                parts[key].append(value * 1000)
            rows_n.append(len(rows))
            del nxt
        name = f"native, {label}"
        out[name] = {
            "rows": int(statistics.median(rows_n)),
            **{k: round(statistics.median(v), 3) for k, v in parts.items()},
        }
        log(f"  page {name}: {out[name]}")
    return out


# -- (6) over HTTP ------------------------------------------------------------------------


def _pages(url: str, bare: bool) -> Callable[[str], int]:
    """A function running one query to its end, returning its pages: through
    QuantaClient (which decodes every page), or `bare` (benchlib.BareClient, reading
    only `next`: the service's own time, as bench/service.py's load generator)."""
    if bare:
        return benchlib.BareClient(url).run
    from quanta.client import QuantaClient

    client = QuantaClient(url, timeout=600)
    return lambda text: sum(1 for _ in client.pages("watdiv", text))


def _client(args: tuple[str, list[str], bool]) -> tuple[int, float]:
    url, queries, bare = args
    run = _pages(url, bare)
    start = time.perf_counter()
    pages = sum(run(text) for text in queries)
    return pages, time.perf_counter() - start


def _shared_client(args: tuple[str, list[str], bool]) -> int:
    url, queries, bare = args
    run = _pages(url, bare)
    pages = 0
    while (index := benchlib.take_next()) < len(queries):
        pages += run(queries[index])
    return pages


TODAY = "today"  # the service before the native core (--today), in the HTTP runs


def over_http(path: Path, queries: list[str], rounds: int, today: Path | None = None) -> dict[str, Any]:
    """The service up (one worker), and with `today` (a checkout of the commit
    before the native core) that one's service beside it (with its own
    defaults: pages of 2,000 rows), their runs alternated round by round, so
    that both see the same load on the machine."""
    import contextlib

    runs: dict[tuple[str, str, str], list[float]] = {}
    pages: dict[tuple[str, str], int] = {}
    with contextlib.ExitStack() as stack:
        urls = {}
        up = benchlib.quanta_up(path, workers=1, quantum_ms=75, max_results=100_000)
        urls["native"], _ = stack.enter_context(up)
        if today is not None:
            urls[TODAY], _ = stack.enter_context(benchlib.quanta_up(path, workers=1, quantum_ms=75, checkout=today))
        for url in urls.values():
            _client((url, queries, True))  # warm-up: parse cache, pages of the file
        for _ in range(rounds):
            for client, bare in (("QuantaClient", False), ("bare", True)):
                for system, url in urls.items():
                    n, seconds = _client((url, queries, bare))
                    pages[(system, client)] = n
                    runs.setdefault((system, client, "sequential"), []).append(seconds)
                    cursor = multiprocessing.Value("i", 0)
                    with multiprocessing.get_context("fork").Pool(
                        4, initializer=benchlib.share_batch, initargs=(cursor,)
                    ) as pool:
                        start = time.perf_counter()
                        sum(pool.map(_shared_client, [(url, queries, bare)] * 4))
                        runs.setdefault((system, client, "four_clients"), []).append(time.perf_counter() - start)
    out: dict[str, Any] = {}
    for system, client in pages:
        seq, par = runs[(system, client, "sequential")], runs[(system, client, "four_clients")]
        out.setdefault(system, {})[client] = {
            "pages": pages[(system, client)],
            "sequential_s": round(statistics.median(seq), 3),
            "four_clients_s": round(statistics.median(par), 3),
            "runs": {"sequential": [round(x, 3) for x in seq], "four_clients": [round(x, 3) for x in par]},
        }
        v = out[system][client]
        log(f"  HTTP {system}, {client}: {v['sequential_s']} s sequential, {v['four_clients_s']} s with 4 clients")
    if today is not None:
        out[TODAY]["commit"] = subprocess.run(
            ["git", "-C", str(today), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    return out


# -- report -------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"Produced by `python bench/native.py{r['argv']}` on {m['date'][:10]} in {r['minutes']:.1f} min "
        f"(git {m['git_commit'][:10]}{' + local changes' if m['git_dirty'] else ''}). Machine: {m['cpu']}, "
        f"{m['nproc']} cores; load average at start {m['load_average_at_start'][0]}. Raw figures: "
        "`bench/results/native.json`. The native store and pyHDT (the reference reading, `storage.hdt`) read the "
        "same HDT file (a copy of the shared WatDiv file, with the metadata `quanta load` writes) in the same run; "
        "the engine runs only on the native store.",
        "",
    ]
    targets = []
    # (1) opening and memory
    lines += [
        "**Opening a dataset, its side index present** (a fresh process, median ms), and the private memory "
        "a second worker adds on the same file (after a full scan and 1 object in 97 read, while a first "
        "worker holds the file):",
        "",
    ]
    lines += [
        "| dataset | file MiB | backend | index MiB | open ms (p50 / max) | second worker private MiB | of the file |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, o in r["open"].items():
        size = o["file_bytes"]
        for backend in STORES:
            b = o[backend]
            share = b["second_worker_private_bytes"] / size
            lines.append(
                f"| {name} | {size / 2**20:.1f} | {backend} | {b['index_bytes'] / 2**20:.1f} | "
                f"{b['open_ms']['p50']:.2f} / {b['open_ms']['max']:.2f} | "
                f"{b['second_worker_private_bytes'] / 2**20:.2f} | {share:.1%} |"
            )
    if "watdiv-10m" in r["open"]:
        o = r["open"]["watdiv-10m"]
        n = o["native"]
        targets.append(
            f"opening watdiv-10m ≤ 100 ms: {n['open_ms']['p50']:.2f} ms (pyHDT {o['pyhdt']['open_ms']['p50']:.0f} ms): "
            + verdict(n["open_ms"]["p50"] <= 100)
        )
        share = n["second_worker_private_bytes"] / o["file_bytes"]
        targets.append(
            f"private memory per extra worker ≤ 10% of the file (watdiv-10m): {share:.1%} "
            f"(pyHDT {o['pyhdt']['second_worker_private_bytes'] / o['file_bytes']:.0%}): " + verdict(share <= 0.10)
        )
    # (2) resume
    for name, shapes_ in r["resume"].items():
        offsets = sorted({int(k) for s in shapes_.values() for k in s["native"]})
        lines += [
            "",
            f"**Resume a scan at an offset** ({name}): `search(s, p, o, offset)` to its first triple, "
            "median µs, native / pyHDT.",
            "",
        ]
        lines += [
            "| shape | matches | " + " | ".join(f"{o:,}" for o in offsets) + " |",
            "| --- | ---: | " + " | ".join("---:" for _ in offsets) + " |",
        ]
        worst = 0.0
        for shape, s in shapes_.items():
            cells = []
            for off in offsets:
                k = str(off)
                cells.append(f"{s['native'][k]:.2f} / {s['pyhdt'][k]:,.1f}" if k in s["native"] else "")
            lines.append(f"| `{shape}` | {s['matches']:,} | " + " | ".join(cells) + " |")
            if shape != "S?O":
                worst = max(worst, *s["native"].values())
        pp = shapes_.get("?P?", {}).get("native", {})
        deepest = max((int(k) for k in pp), default=0)
        targets.append(
            f"resume of any scan at any offset ≤ 2 µs ({name}; `S?O` walks the subject's pairs): worst {worst:.2f} µs, "
            f"`?P?` at {deepest:,}: {pp.get(str(deepest), 0):.2f} µs (pyHDT "
            f"{shapes_['?P?']['pyhdt'].get(str(deepest), 0) / 1000:.2f} ms): " + verdict(worst <= 2)
        )
    # (3) join
    j = r["join"]
    native_join = j.get("native") or j["native, native execution"]  # the latter: results with pyHDT's engine
    lines += [
        "",
        "**The join** `?u wsdbm:friendOf ?f . ?f wsdbm:likes ?p` on watdiv-1m "
        f"({native_join['rows']:,} "
        "rows), the engine's `run()` at an infinite quantum, rows of ids handed to Python (median of "
        f"{r['repeats']}), rows per second:",
        "",
    ]
    lines += ["| backend | per CPU second | per wall second |", "| --- | ---: | ---: |"]
    for key, v in j.items():
        lines.append(f"| {key} | {v['rows_per_s_cpu'] / 1e6:.2f} M | {v['rows_per_s_wall'] / 1e6:.2f} M |")
    rate = native_join["rows_per_s_cpu"]
    old = j.get("pyhdt, Python operators")
    targets.append(
        f"join rows per second per core ≥ 2 M: {rate / 1e6:.2f} M"
        + (f" (pyHDT {old['rows_per_s_cpu'] / 1e6:.2f} M)" if old else "")
        + ": "
        + verdict(rate >= 2e6)
    )
    # (4) suspend + resume
    s = r["suspend_resume"]
    lines += [
        "",
        "**Suspend + resume in situ** at a 75 ms quantum: the 200 basic and 100 stress queries on watdiv-1m through "
        "`execute()`, pages of at most 1 MiB of JSON (the service's budget), each resumed from the previous "
        "page's bytes in the same process (a worker's warm pool); ms, n / p50 / p99 / max / mean:",
        "",
    ]
    lines += [
        "| backend | pages | suspend + resume | suspend | resume | plan bytes | quantum ms |",
        "| --- | ---: | --- | --- | --- | --- | --- |",
    ]

    def fmt(p: dict[str, float]) -> str:
        return " / ".join(str(p.get(k, "")) for k in ("n", "p50", "p99", "max", "mean")) if p else ""

    for backend, b in s.items():
        lines.append(
            f"| {backend} | {b['pages']} | {fmt(b['suspend_plus_resume_ms'])} | {fmt(b['suspend_ms'])} | "
            f"{fmt(b['resume_ms'])} | {fmt(b['plan_bytes'])} | {fmt(b['quantum_ms'])} |"
        )
    n = s["native"]["suspend_plus_resume_ms"]
    if n:
        ref = s["pyhdt"]["suspend_plus_resume_ms"] if "pyhdt" in s else None
        targets.append(
            f"suspend + resume in situ at 75 ms p50 ≤ 0.05 ms, p99 ≤ 0.5 ms: {n['p50']:.3f} / {n['p99']:.3f} ms"
            + (f" (pyHDT {ref.get('p50', 0):.3f} / {ref.get('p99', 0):.3f})" if ref is not None else "")
            + ": "
            + verdict(n["p50"] <= 0.05 and n["p99"] <= 0.5)
        )
    # (5) page profile
    lines += [
        "",
        "**Where a page's time goes** (C3_1 on watdiv-1m, resumed mid-query, median ms): resume "
        "(`Plan.load`), run (the quantum's work), suspend (`save`), decode (ids to strings), JSON (the Python "
        "writer on those strings), native JSON (written from the ids, no decoding):",
        "",
    ]
    lines += [
        "| backend, page | rows | resume | run | suspend | decode | JSON | native JSON |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key, v in r["page"].items():
        lines.append(
            f"| {key} | {v['rows']:,} | {v['resume']} | {v['run']} | {v['suspend']} | {v['decode']} | {v['json']} | "
            f"{v.get('native_json', '')} |"
        )
    # (6) HTTP
    if r.get("http"):
        h = r["http"]
        lines += [
            "",
            "**Over HTTP**: the 200 basic queries on watdiv-1m through `quanta up` (gateway, Redis, one worker, "
            "75 ms quantum, 1 MiB pages"
            + ("; both backends' services up at once, their runs alternated" if "pyhdt" in h else "")
            + (
                f"; beside {'them' if 'pyhdt' in h else 'it'} the service before the native core, commit "
                f"{h[TODAY]['commit']}, with its own defaults: pages of 2,000 rows"
                + ("" if "pyhdt" in h else ", their runs alternated")
                if TODAY in h
                else ""
            )
            + "), each "
            "followed through `next` to its end, by `QuantaClient` (which "
            "decodes every page's JSON) and by a bare client (http.client, reading only `next`: the service's own "
            f"time); median of {r['http_rounds']} runs after a warm-up run, seconds:",
            "",
            "| backend | client | pages | sequential | 4 clients sharing the 200 |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for system in h:
            for client, v in h[system].items():
                if client != "commit":
                    name = f"before the native core ({h[TODAY]['commit']}, pyHDT)" if system == TODAY else system
                    lines.append(f"| {name} | {client} | {v['pages']} | {v['sequential_s']} | {v['four_clients_s']} |")
        for client in h["native"]:
            n, p = h["native"][client], h.get("pyhdt", {}).get(client)
            targets.append(
                f"200 basic queries over HTTP, one worker, sequential ≤ 1.1 s ({client}): {n['sequential_s']} s"
                + (f" (pyHDT {p['sequential_s']} s)" if p else "")
                + ": "
                + verdict(n["sequential_s"] <= 1.1)
            )
            if p:
                ratio = n["four_clients_s"] / p["four_clients_s"]
                targets.append(
                    f"with 4 clients ≤ 1/5 of pyHDT's time ({client}): {n['four_clients_s']} s vs "
                    f"{p['four_clients_s']} s, {ratio:.2f}: " + verdict(ratio <= 0.2)
                )
            if TODAY in h:
                t = h[TODAY][client]
                ratio = n["four_clients_s"] / t["four_clients_s"]
                targets.append(
                    f"with 4 clients ≤ 1/5 of the time before the native core ({client}, {h[TODAY]['commit']} run "
                    f"beside it): {n['four_clients_s']} s vs {t['four_clients_s']} s, {ratio:.2f}: "
                    + verdict(ratio <= 0.2)
                )
    lines += ["", "**Figures vs targets**", ""] + [f"- {t}" for t in targets]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("QUANTA_WATDIV", shared_dir() / "datasets" / "watdiv"))
    )
    parser.add_argument("--quick", action="store_true", help="1m only, fewer repetitions, no HTTP; docs untouched")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--render", type=Path, help="only rewrite the docs block from a saved result")
    parser.add_argument(
        "--today",
        type=Path,
        help="a checkout of the commit before the native core, installed, whose service joins the HTTP runs "
        "(git worktree add /tmp/today 7317c22 && make -C /tmp/today install)",
    )
    args = parser.parse_args()
    if args.render:
        benchlib.replace_block(DOC, "native", render(json.loads(args.render.read_text())))
        return 0
    started = time.time()
    queries = sorted((args.data / "queries" / "basic").glob("*.rq"))
    repeats = 1 if args.quick else 3
    r: dict[str, Any] = {
        "argv": "".join(f" {a}" for a in sys.argv[1:]),
        "machine": benchlib.machine({"pyhdt": "hdt", "quanta_native": "quanta-native", "pyoxigraph": "pyoxigraph"}),
        "repeats": repeats,
        "http_rounds": 1 if args.quick else 5,
    }
    names = ["watdiv-1m"] if args.quick else ["watdiv-1m", "watdiv-10m"]
    paths = {name: prepared(args.data, name) for name in names}
    log("opening and memory")
    r["open"] = {name: opening(path, 3 if args.quick else 9) for name, path in paths.items()}
    log("resume per shape")
    r["resume"] = {name: resume_costs(path, args.quick) for name, path in paths.items()}
    log("join")
    r["join"] = join_rate(paths["watdiv-1m"], repeats)
    log("suspend + resume in situ")
    stress = sorted((args.data / "queries" / "stress").glob("*.rq"))
    r["suspend_resume"] = suspend_resume(paths["watdiv-1m"], [q.read_text() for q in queries + stress], 20)
    log("page profile")
    r["page"] = page_profile(
        paths["watdiv-1m"], (args.data / "queries" / "basic" / C3).read_text(), 5 if args.quick else 15
    )
    if not args.quick:
        log("over HTTP")
        r["http"] = over_http(paths["watdiv-1m"], [q.read_text() for q in queries], r["http_rounds"], args.today)
    r["minutes"] = (time.time() - started) / 60
    out = args.out or (WORK / "native-quick.json" if args.quick else RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(r, indent=1) + "\n")
    log(f"wrote {out}")
    if not args.quick:
        benchlib.replace_block(DOC, "native", render(r))
    else:
        print(textwrap.indent(render(r), "  "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
