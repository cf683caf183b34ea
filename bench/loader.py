"""Loader benchmark: `quanta load` against the bare `hdt convert`, on WatDiv N-Triples.

Measures, in one run and for each size asked (default 100k, 1m, 10m and 30m: three copies of 10m,
the entities of copies 2 and 3 moved to their own namespaces; about 100 s per conversion here),
like the seed's loading tables (load time, storage footprint by dataset size):

1. load time, triples per second, CPU seconds and peak memory of `quanta load IN.nt -o OUT.hdt`
   (everything: parse, HDT, side index, verification, metadata) and, side by side on the same
   file, of the bare converter `hdt convert IN.nt OUT.hdt` (the `hdt` crate 0.7.3's CLI: HDT
   only, no index, no checks), interleaved, median of the repeats; also `quanta load IN.nt.gz`;
2. bytes per triple: N-Triples, gzip, HDT, side index;
3. the memory model of services/loader (quanta.loader.memory): predicted against measured peak,
   on WatDiv and on two harder shapes (every object a distinct literal; WatDiv as Turtle).

Writes JSON (default bench/results/loader.json) and the block between `<!-- loader:begin -->` and
`<!-- loader:end -->` in docs/benchmarks.md. Run: `make bench-loader` (or `python bench/loader.py
--help`; about 20 minutes, plus 5 the first time to prepare the inputs, in /tmp/quanta-bench/loader,
kept for the next run, 12 GB of disk). `--report-only` rewrites the docs block from the JSON.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = Path(os.environ.get("QUANTA_WATDIV", REPO.parent / "shared" / "datasets" / "watdiv"))
WORK = Path(os.environ.get("QUANTA_BENCH_TMP", "/tmp/quanta-bench")) / "loader"
DOCS = REPO / "docs" / "benchmarks.md"
MIB = 1 << 20
TARGET_RATE = 0.9  # of the bare converter's rate
TARGET_BYTES_PER_TRIPLE = 12.0
DEFAULT_SIZES = "100k,1m,10m,30m"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- inputs -------------------------------------------------------------------------------------------------


def bare_converter() -> str:
    found = str(Path(sys.executable).parent / "hdt")  # `make bench-loader` builds it there
    if not os.access(found, os.X_OK):
        sys.exit("the bare converter `hdt` is missing: scripts/bootstrap.sh --bare-converter")
    return found


def gunzip(src: Path, dst: Path) -> None:
    if dst.exists():
        return
    log(f"decompressing {src.name}")
    partial = dst.with_suffix(".partial")
    with gzip.open(src, "rb") as f, open(partial, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 22)
    partial.rename(dst)


def gzip_file(src: Path, dst: Path) -> None:
    if dst.exists():
        return
    log(f"compressing {src.name} (gzip -6)")
    partial = dst.with_suffix(".partial")
    with open(src, "rb") as f, gzip.open(partial, "wb", compresslevel=6) as out:
        shutil.copyfileobj(f, out, 1 << 22)
    partial.rename(dst)


def export_10m(data: Path, dst: Path) -> None:
    """watdiv-10m has no N-Triples copy: the bare converter writes one from the HDT (a private copy)."""
    if dst.exists():
        return
    copy = WORK / "watdiv-10m.hdt"
    if not copy.exists():
        shutil.copyfile(data / "watdiv-10m.hdt", copy)
    log("exporting watdiv-10m.hdt to N-Triples")
    partial = WORK / "watdiv-10m.partial.nt"  # the converter wants the .nt extension
    subprocess.run([bare_converter(), "convert", str(copy), str(partial)], check=True, capture_output=True)
    partial.rename(dst)


def renamespaced(src: Path, dst: Path, copies: int) -> None:
    """A WatDiv-like dataset `copies` times larger: copy k has its entities under wsdbm/cK/."""
    if dst.exists():
        return
    log(f"writing {dst.name} ({copies} renamespaced copies of {src.name})")
    partial = dst.with_suffix(".partial")
    with open(partial, "wb") as out:
        for k in range(copies):
            with open(src, "rb") as f:
                while chunk := f.readlines(1 << 24):
                    data = b"".join(chunk)
                    out.write(data.replace(b"/wsdbm/", b"/wsdbm/c%d/" % k) if k else data)
    partial.rename(dst)


def distinct_literals(dst: Path, triples: int) -> None:
    """The costliest shape per byte: every subject and every object literal is distinct."""
    if dst.exists():
        return
    log(f"writing {dst.name}")
    partial = dst.with_suffix(".partial")
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
    words += ["hotel", "india", "juliet", "kilo", "lima", "mike"]
    with open(partial, "w") as out:
        for start in range(0, triples, 100_000):
            lines = []
            for i in range(start, min(triples, start + 100_000)):
                text = " ".join(words[(i >> k) % len(words)] for k in range(0, 24, 3))
                lines.append(f'<http://example.org/item/{i}> <http://example.org/p{i % 20}> "{text} {i}" .\n')
            out.writelines(lines)
    partial.rename(dst)


def distinct_short(dst: Path, triples: int) -> None:
    """The costliest shape per byte among these: short lines, two distinct terms in each."""
    if dst.exists():
        return
    log(f"writing {dst.name}")
    partial = dst.with_suffix(".partial")
    with open(partial, "w") as out:
        out.writelines(f'<http://e.org/s{i}> <http://e.org/p{i % 7}> "{i}" .\n' for i in range(triples))
    partial.rename(dst)


def turtle_of(src: Path, dst: Path) -> None:
    """The same triples as Turtle with prefixes and subject grouping (more triples per byte)."""
    if dst.exists():
        return
    log(f"writing {dst.name}")
    # in a child process: sorting a million triples in Python would leave this process large
    subprocess.run([sys.executable, __file__, "--make-turtle", str(src), str(dst)], check=True)


def _turtle(src: str, dst: str) -> None:
    import pyoxigraph as ox

    prefixes = {
        "wsdbm": "http://db.uwaterloo.ca/~galuc/wsdbm/",
        "sorg": "http://schema.org/",
        "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
        "foaf": "http://xmlns.com/foaf/",
        "gr": "http://purl.org/goodrelations/",
        "rev": "http://purl.org/stuff/rev#",
        "dc": "http://purl.org/dc/terms/",
        "og": "http://ogp.me/ns#",
        "mo": "http://purl.org/ontology/mo/",
        "gn": "http://www.geonames.org/ontology#",
    }
    triples = sorted(ox.parse(path=src, format=ox.RdfFormat.N_TRIPLES), key=lambda t: str(t.subject))
    partial = dst + ".partial"
    ox.serialize(triples, partial, format=ox.RdfFormat.TURTLE, prefixes=prefixes)
    os.rename(partial, dst)


# -- measuring ----------------------------------------------------------------------------------------------


GNU_TIME = "/usr/bin/time"


def measure(cmd: list[str]) -> dict[str, Any]:
    """Wall and CPU time and peak resident memory of a command and its children.

    GNU time measures them when present: ru_maxrss of a child started from this (larger) process
    would start at this process's own peak, inherited at exec."""
    timed = os.access(GNU_TIME, os.X_OK)
    report = WORK / "time.txt"
    full = [GNU_TIME, "-f", "%e %U %S %M", "-o", str(report), *cmd] if timed else cmd
    with open(WORK / "stdout.tmp", "w+b") as out, open(WORK / "stderr.tmp", "w+b") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}): {stderr[-2000:]}")
    cpu, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024
    if timed:
        elapsed, user, system, max_kb = report.read_text().split()[-4:]
        wall, cpu, peak = float(elapsed), float(user) + float(system), int(max_kb) * 1024
    return {"seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "peak_rss_bytes": peak, "stdout": stdout}


def run_ours(src: Path, out: Path) -> dict[str, Any]:
    for p in (out, Path(f"{out}.quanta-index.v1"), Path(f"{out}.meta.json")):
        p.unlink(missing_ok=True)
    m = measure([sys.executable, "-m", "quanta.cli.main", "load", str(src), "-o", str(out)])
    summary = json.loads(m.pop("stdout"))
    m.update(
        # the driver and the converter run at the same time: their sum, which the loader measures
        peak_rss_bytes=summary["peak_memory_bytes"],
        largest_process_rss_bytes=m["peak_rss_bytes"],
        triples=summary["distinct_triples"],
        hdt_bytes=summary["hdt_bytes"],
        index_bytes=summary["index_bytes"],
        phases=summary["phases"],
    )
    return m


def run_bare(src: Path, out: Path) -> dict[str, Any]:
    out.unlink(missing_ok=True)
    m = measure([bare_converter(), "convert", str(src), str(out)])
    m.pop("stdout")
    m.update(hdt_bytes=out.stat().st_size, index_bytes=0)
    return m


def model_of(src: Path) -> dict[str, Any]:
    """The memory model's two predictions for an input: from its size alone, and sampled."""
    from quanta.loader import memory
    from quanta.loader.build import converter
    from quanta.loader.inputs import Source

    sources = [Source.probe(str(src))]
    sampled = memory.sampled(sources, converter())
    return {
        "uncompressed_bytes": sources[0].uncompressed_bytes,
        "bound_bytes": memory.bound(sources),
        "sampled_bytes": sampled.peak_bytes,
        "sampled_counts": [sampled.triples, sampled.distinct_terms, sampled.distinct_term_bytes],
    }


# -- the run ------------------------------------------------------------------------------------------------


def prepare(sizes: list[str], data: Path) -> dict[str, dict[str, Path]]:
    WORK.mkdir(parents=True, exist_ok=True)
    inputs: dict[str, dict[str, Path]] = {}
    for size in sizes:
        nt = WORK / f"watdiv-{size}.nt"
        gz = data / f"watdiv-{size}.nt.gz"
        if size in ("100k", "1m"):
            gunzip(gz, nt)
        elif size == "10m":
            export_10m(data, nt)
            gz = WORK / "watdiv-10m.nt.gz"
            gzip_file(nt, gz)
        elif m := re.fullmatch(r"(\d+)0m", size):
            export_10m(data, WORK / "watdiv-10m.nt")
            renamespaced(WORK / "watdiv-10m.nt", nt, int(m.group(1)))
            gz = WORK / f"watdiv-{size}.nt.gz"
            gzip_file(nt, gz)
        else:
            sys.exit(f"unknown size {size!r} (100k, 1m, 10m, 20m, 30m, ...)")
        inputs[size] = {"nt": nt, "gz": gz}
    return inputs


def bench_size(size: str, files: dict[str, Path], repeats: int, with_gz: bool) -> dict[str, Any]:
    nt, gz = files["nt"], files["gz"]
    runs: dict[str, list[dict[str, Any]]] = {"bare": [], "ours": [], "ours_gz": []}
    load = [os.getloadavg()[0]]
    for r in range(repeats):
        order = ["bare", "ours", "ours_gz"] if r % 2 == 0 else ["ours", "bare", "ours_gz"]
        for who in order:
            if who == "ours_gz" and not with_gz:
                continue
            log(f"watdiv-{size}: {who} run {r + 1}/{repeats}")
            if who == "bare":
                runs[who].append(run_bare(nt, WORK / "bare.hdt"))
            else:
                runs[who].append(run_ours(gz if who == "ours_gz" else nt, WORK / "ours.hdt"))
    load.append(os.getloadavg()[0])
    triples = runs["ours"][0]["triples"]
    result: dict[str, Any] = {
        "triples": triples,
        "nt_bytes": nt.stat().st_size,
        "gz_bytes": gz.stat().st_size,
        "load_average": [round(x, 2) for x in load],
        "runs": runs,
    }
    for who, samples in runs.items():
        if not samples:
            continue
        med = {k: statistics.median(s[k] for s in samples) for k in ("seconds", "cpu_seconds", "peak_rss_bytes")}
        med["triples_per_second"] = round(triples / med["seconds"])
        med["hdt_bytes"] = samples[0]["hdt_bytes"]
        med["index_bytes"] = samples[0]["index_bytes"]
        if "phases" in samples[0]:
            med["phases"] = {p: statistics.median(s["phases"][p] for s in samples) for p in samples[0]["phases"]}
        result[who] = med
    result["model"] = model_of(nt)
    result["rate_vs_bare"] = round(result["ours"]["triples_per_second"] / result["bare"]["triples_per_second"], 3)
    conv = sum(result["ours"]["phases"][p] for p in ("parse", "dictionary", "write"))
    result["conversion_rate_vs_bare"] = round(result["bare"]["seconds"] / conv, 3)
    return result


def bench_memory_shapes(files: dict[str, dict[str, Path]]) -> dict[str, Any]:
    """Peak memory against the model's predictions, on shapes harder than WatDiv's."""
    shapes: dict[str, Path] = {}
    unique = WORK / "distinct-literals-1m.nt"
    distinct_literals(unique, 1_000_000)
    shapes["1M triples, every subject and literal distinct (long literals)"] = unique
    short = WORK / "distinct-short-1m.nt"
    distinct_short(short, 1_000_000)
    shapes["1M triples, every subject and literal distinct (short lines)"] = short
    if "1m" in files:
        ttl = WORK / "watdiv-1m.ttl"
        turtle_of(files["1m"]["nt"], ttl)
        shapes["watdiv-1m as Turtle (prefixes, grouped subjects)"] = ttl
    result = {}
    for label, path in shapes.items():
        log(f"memory: {label}")
        m = run_ours(path, WORK / "ours.hdt")
        result[label] = {"path": path.name, "bytes": path.stat().st_size, **m, "model": model_of(path)}
    return result


def machine() -> dict[str, Any]:
    from quanta.loader.build import converter

    return benchlib.machine(
        {"quanta_native": "quanta-native"},
        {"bare_converter": [bare_converter(), "--version"], "quanta_rdf2hdt": [converter(), "--version"]},
    )


# -- the report ---------------------------------------------------------------------------------------------


def per_triple(n: float, triples: int) -> str:
    return f"{n / triples:.2f}"


def report(results: dict[str, Any], command: str) -> str:
    from quanta.loader import memory

    m = results["machine"]
    # the side index's builder: the native core's (pyHDT's in results from before `quanta load` built it natively)
    indexer = f"quanta-native {m['quanta_native']}" if "quanta_native" in m else f"pyHDT {m['pyhdt']}"
    lines = [
        f"`{command}` on {m['cpu']} ({m['nproc']} cores, {m['memory_gb']} GB), {m['date']}, "
        f"git {m['git_commit'][:10]}{' + local changes' if m['git_dirty'] else ''}; "
        f"{m['quanta_rdf2hdt']} against the bare `{m['bare_converter']}`; {indexer} builds the index. "
        "Seconds, CPU and peak memory are medians over the repeats: wall clock of the whole command, CPU = user + "
        "system of the process tree; peak = for `hdt convert` its largest resident set, for `quanta load` the "
        "loader's own figure (the converter's peak plus the Python driver's memory at the time, or the index "
        "build's peak if larger). Rates are triples per wall second. "
        "watdiv-10m is the shared HDT exported to N-Triples; watdiv-30m is three copies of it, the entity IRIs of "
        "copies 2 and 3 moved under `wsdbm/c1/` and `wsdbm/c2/` (literals repeat across copies, hence the smaller "
        "HDT per triple).",
        "",
        "| input | triples | N-Triples B/triple | gzip B/triple | command | seconds | k triples/s | rate vs bare "
        "| CPU s | peak MiB | HDT B/triple | index B/triple | HDT + index B/triple |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, r in results["sizes"].items():
        t = r["triples"]
        rows = [("bare", "`hdt convert x.nt`"), ("ours", "`quanta load x.nt`"), ("ours_gz", "`quanta load x.nt.gz`")]
        first = True
        for who, label in rows:
            if who not in r:
                continue
            x = r[who]
            ratio = x["triples_per_second"] / r["bare"]["triples_per_second"]
            lines.append(
                f"| {'watdiv-' + size if first else ''} | {f'{t:,}' if first else ''} "
                f"| {per_triple(r['nt_bytes'], t) if first else ''} | {per_triple(r['gz_bytes'], t) if first else ''} "
                f"| {label} | {x['seconds']:.2f} | {x['triples_per_second'] / 1000:,.0f} | {ratio:.0%} "
                f"| {x['cpu_seconds']:.2f} | {x['peak_rss_bytes'] / MIB:,.0f} | {per_triple(x['hdt_bytes'], t)} "
                f"| {per_triple(x['index_bytes'], t) if x['index_bytes'] else '-'} "
                f"| {per_triple(x['hdt_bytes'] + x['index_bytes'], t)} |"
            )
            first = False
    lines += [
        "",
        "Where `quanta load`'s time goes (median seconds): parse = reading and parsing (and the dictionary interning, "
        "which overlaps it), dictionary = the `hdt` crate's dictionary and triple bitmaps, write = the HDT file, "
        "index = the side index, built and the file read back through it; the rest is Python start-up, verification "
        "and metadata.",
        "",
        "| input | parse | dictionary | write | conversion (sum) | bare `hdt convert` | index | total |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, r in results["sizes"].items():
        p = r["ours"]["phases"]
        conv = p["parse"] + p["dictionary"] + p["write"]
        lines.append(
            f"| watdiv-{size} | {p['parse']:.2f} | {p['dictionary']:.2f} | {p['write']:.2f} | {conv:.2f} "
            f"| {r['bare']['seconds']:.2f} | {p['index']:.2f} | {r['ours']['seconds']:.2f} |"
        )
    lines += [
        "",
        "Memory model (`quanta.loader.memory`, see services/loader/README.md): predicted peak = "
        f"{memory.BASE / MIB:.0f} MiB + {memory.PER_TRIPLE:g} B x triples + {memory.PER_TERM:g} B x distinct terms + "
        f"{memory.PER_TERM_BYTE:g} x distinct term bytes, the counts extrapolated from the first "
        f"{memory.SAMPLE_BYTES // MIB} MiB of the input; that sampling runs only when the bound from the size alone "
        "(the costliest data per byte) exceeds the budget. Measured = the loader's own figure: the converter's peak "
        "plus the Python driver's memory at the time, or the index build's peak if larger.",
        "",
        "| input | uncompressed MiB | triples | measured peak MiB | sampled estimate MiB | measured / estimate "
        "| size bound MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    model_rows = [
        (f"watdiv-{size} (N-Triples)", r["triples"], r["ours"], r["model"]) for size, r in results["sizes"].items()
    ]
    model_rows += [(label, r["triples"], r, r["model"]) for label, r in results["memory_shapes"].items()]
    worst = 0.0
    for label, triples, x, model in model_rows:
        ratio = x["peak_rss_bytes"] / model["sampled_bytes"]
        worst = max(worst, ratio)
        lines.append(
            f"| {label} | {model['uncompressed_bytes'] / MIB:,.0f} | {triples:,} | {x['peak_rss_bytes'] / MIB:,.0f} "
            f"| {model['sampled_bytes'] / MIB:,.0f} | {ratio:.2f} | {model['bound_bytes'] / MIB:,.0f} |"
        )
    lines += ["", interpretation(results, worst)]
    return "\n".join(lines)


def interpretation(results: dict[str, Any], worst_model_ratio: float) -> str:
    sizes = results["sizes"]
    key = "1m" if "1m" in sizes else next(iter(sizes))
    r = sizes[key]
    largest = list(sizes)[-1]
    big = sizes[largest]
    rate, conv = r["rate_vs_bare"], r["conversion_rate_vs_bare"]
    verdict = "within" if rate >= TARGET_RATE else "short of"
    bpt = max((x["ours"]["hdt_bytes"] + x["ours"]["index_bytes"]) / x["triples"] for x in sizes.values())
    out_bytes = r["ours"]["hdt_bytes"] + r["ours"]["index_bytes"]
    index_share = r["ours"]["phases"]["index"] / r["ours"]["seconds"]
    gz_ratio = r["ours_gz"]["seconds"] / r["ours"]["seconds"] if "ours_gz" in r else None
    loads = [x["load_average"][0] for x in sizes.values()]
    text = (
        f"On watdiv-{key}, `quanta load` runs end to end at {r['ours']['triples_per_second'] / 1000:,.0f} k triples/s "
        f"against {r['bare']['triples_per_second'] / 1000:,.0f} k for the bare converter on the same file: "
        f"{rate:.0%} of its rate, {verdict} the 90% target. It does more than the bare converter: its conversion "
        f"alone (oxttl parsing line blocks in parallel, feeding the crate's `from_triples`) takes "
        f"{1 / conv:.0%} of the bare converter's time, the side index (which workers would otherwise build at "
        f"start-up) {index_share:.0%} of the total, and the file is read back to check that it holds exactly "
        f"the distinct triples parsed. On watdiv-{largest} ({big['triples']:,} triples) the rate is "
        f"{big['rate_vs_bare']:.0%} of the bare converter's. HDT plus index take at most {bpt:.1f} bytes per triple "
        f"(target 12): 1/{r['nt_bytes'] / out_bytes:.0f} of the N-Triples and {out_bytes / r['gz_bytes']:.1f}x the "
        "gzip file, queryable without decompression."
    )
    if gz_ratio is not None:
        text += f" Loading the `.nt.gz` directly takes {gz_ratio:.2f}x the time of the plain file" + (
            " (decompression overlaps parsing, and there are far fewer bytes to read)." if gz_ratio <= 1.05 else "."
        )
    if worst_model_ratio <= 1:
        text += (
            " Peak memory grows linearly with the input and stays under the model's prediction on every input "
            f"measured (largest measured/predicted {worst_model_ratio:.2f}), so `--max-memory` errs on the side of "
            "refusing."
        )
    else:
        text += (
            f" Peak memory exceeded the model's prediction on at least one input (measured/predicted up to "
            f"{worst_model_ratio:.2f}): the model's constants need raising."
        )
    text += (
        f" The machine is a shared 2-core VM (load average {min(loads):.1f} to {max(loads):.1f} when each size "
        "started): both converters ran interleaved under the same load, and CPU seconds are less disturbed by it than "
        "wall time."
    )
    return text


def write_docs(block: str) -> None:
    benchlib.replace_block(DOCS, "loader", block)


def main() -> int:
    if sys.argv[1:2] == ["--make-turtle"]:  # internal: see turtle_of
        _turtle(sys.argv[2], sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="WatDiv sizes: 100k, 1m, 10m, 20m, 30m, ...")
    parser.add_argument("--repeats", type=int, default=3, help="runs per converter for sizes up to 1m")
    parser.add_argument("--large-repeats", type=int, default=2, help="runs per converter above 1m")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the WatDiv folder")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "loader.json")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument("--report-only", action="store_true", help="rewrite the docs block from --out's JSON")
    args = parser.parse_args()
    if args.report_only:
        stored: dict[str, Any] = json.loads(args.out.read_text())
        block = report(stored, stored["command"])
        stored["report"] = block
        args.out.write_text(json.dumps(stored, indent=2) + "\n")
        write_docs(block)
        print(block)
        return 0
    sizes = args.sizes.split(",")
    command = "make bench-loader" if args.sizes == DEFAULT_SIZES else f"python bench/loader.py --sizes {args.sizes}"
    results: dict[str, Any] = {"machine": machine(), "command": command, "sizes": {}}
    files = prepare(sizes, args.data)
    for size in sizes:
        small = size in ("100k", "1m")
        repeats = args.repeats if small else args.large_repeats
        results["sizes"][size] = bench_size(size, files[size], repeats, with_gz=True)
        r = results["sizes"][size]
        log(f"watdiv-{size}: ours {r['ours']['seconds']} s, bare {r['bare']['seconds']} s ({r['rate_vs_bare']:.0%})")
    results["memory_shapes"] = bench_memory_shapes(files)
    block = report(results, command)
    results["report"] = block
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    log(f"wrote {args.out}")
    if not args.no_docs:
        write_docs(block)
        log(f"wrote {DOCS}")
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
