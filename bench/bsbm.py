"""The Berlin SPARQL Benchmark with its own driver: quanta against Fuseki, Oxigraph and Virtuoso.

Issue 20, part 1: quanta's `/sparql` against Apache Jena Fuseki, Oxigraph's server and Virtuoso
on this machine, driven by BSBM's own test driver.

    python bench/bsbm.py [--products 1k,10k] [--clients 1,4] [--systems quanta,fuseki,oxigraph,virtuoso]
                         [--reference oxigraph] [--explore-runs 100] [--bi-runs 10] [--quick]

For each scale: BSBM's generator (`benchmark.generator.Generator -pc N -s nt`, from Maven Central's
`org.aksw.bsbm:bsbm-core` through scripts/bsbm.sh) writes the N-Triples dump and the driver's data;
each system loads it with its own loader (quanta: `quanta load` to HDT; Fuseki: `tdb2.tdbloader`
to a TDB2 database, or `--fuseki memory`; Oxigraph: `oxigraph load` to RocksDB; Virtuoso:
`ld_dir` + `rdf_loader_run()` through isql) and serves it, all of them up at once. Then:

1. qualification: the driver's qualification mode (`-q`, 15 query mixes, the default seed)
   against every system, each compared with the reference's (`benchmark.qualification.
   Qualification`): a query of quanta's whose answer differs from the reference's fails the run
   (exit 1, results written to /tmp/quanta-bench/bsbm-failed.json, docs untouched); a peer's
   differences are reported beside its figures;
2. measurement: the driver's explore and business-intelligence mixes (`-ucf .../usecases/
   explore/sparql.txt` and `.../businessIntelligence/sparql.txt`) at each client count (`-mt`),
   against one system at a time, the systems' order rotating from one (use case, clients) pair
   to the next: QMpH, per-query AQET, timeouts (`-t`), errors; the resident memory of each
   server's processes sampled meanwhile (peak), and idle after loading and after the runs.

Writes bench/results/bsbm.json, the `bsbm` block of docs/benchmarks.md and docs/img/bsbm.png.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder
import native  # bench/: opening a store, a second worker's memory, suspend + resume in situ
from peers import (  # bench/: the systems' loaders and servers, shared with bench/sparql.py
    Sampler,
    Server,
    helper,
    memory,
    start_fuseki,
    start_oxigraph,
    start_quanta,
    start_virtuoso,
)

REPO = benchlib.REPO
WORK = Path(tempfile.gettempdir()) / "quanta-bench" / "bsbm"
BSBM_VERSION = os.environ.get("QUANTA_BSBM_VERSION", "3.1.10")
SYSTEMS = ("quanta", "fuseki", "oxigraph", "virtuoso")
USECASES = {"explore": "usecases/explore/sparql.txt", "bi": "usecases/businessIntelligence/sparql.txt"}
USECASE_TITLE = {"explore": "Explore", "bi": "Business intelligence"}
DUMP = "dataset.nt.gz"  # every loader here reads gzip
QUALDUMP = REPO / "bench" / "QualDump.java"  # prints a qualification file as text (tests/bsbm's too)
# the driver's messages for a query that failed (it goes on with the next)
DRIVER_ERRORS = re.compile(r"Received error code|Query execution error|Could not connect|Could not read result")


STARTED = time.monotonic()


def log(message: str) -> None:
    """A progress line, with the time since the start."""
    elapsed = int(time.monotonic() - STARTED)
    print(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", flush=True)


# ---- the systems (bench/peers.py) -------------------------------------------------------------


def start(name: str, stack: ExitStack, data: Path, out: Path, args: argparse.Namespace) -> Server:
    """System `name` loaded with BSBM's dump under `data` and up, its files under `out`."""
    ntriples = data / DUMP
    if name == "quanta":
        return start_quanta(
            stack,
            ntriples,
            out,
            workers=args.workers,
            gateways=args.gateways,
            quantum_ms=args.quantum_ms,
            max_memory=args.quanta_load_memory,
        )
    if name == "fuseki":
        return start_fuseki(stack, ntriples, out, storage=args.fuseki, heap=args.fuseki_heap)
    if name == "oxigraph":
        return start_oxigraph(stack, ntriples, out)
    if name == "virtuoso":
        return start_virtuoso(stack, ntriples, out, gb=args.virtuoso_gb)
    raise ValueError(name)


# ---- the driver ------------------------------------------------------------------------------


@dataclass
class Driver:
    classpath: str  # the folder of jars, with /*
    home: Path  # the jar's queries/ and usecases/, unpacked: the driver's working folder

    @classmethod
    def fetch(cls) -> Driver:
        lib = Path(helper("bsbm.sh"))
        home = WORK / f"driver-{BSBM_VERSION}"
        if not (home / "usecases").is_dir():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            subprocess.run(
                [
                    "unzip",
                    "-q",
                    "-o",
                    str(lib / f"bsbm-core-{BSBM_VERSION}.jar"),
                    "queries/*",
                    "usecases/*",
                    "-d",
                    str(home),
                ],
                check=True,
            )
        return cls(f"{lib}/*", home)

    def java(self, main: str, *args: str, cwd: Path | None = None, timeout: float | None = None) -> str:
        done = subprocess.run(
            ["java", "-Xmx1g", "-cp", self.classpath, main, *args],
            cwd=cwd or self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0:
            lines = [line for line in output.splitlines() if line.strip() and not line.startswith(("\tat ", "SLF4J"))]
            cause = next((line for line in lines if DRIVER_ERRORS.search(line) or "Exception" in line), "")
            # the driver stops at a query's first failure: that line first, then the output's end
            raise RuntimeError(f"{main} failed ({done.returncode}): {cause[:300]}\n" + "\n".join(lines[-15:]))
        return output

    def generate(self, products: int) -> dict[str, Any]:
        """BSBM's dump (gzipped: 100 M triples are 26 GB of N-Triples, 4 GB gzipped) and the driver's
        data at `products`, made once and kept under WORK."""
        data = WORK / f"pc{products}"
        marker = data / "generated.json"
        if marker.exists() and (data / DUMP).exists():
            return {**json.loads(marker.read_text()), "dir": str(data)}
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        started = time.perf_counter()
        # the generator writes into a pipe that gzip reads: the plain dump never touches the disk
        pipe = data / "dataset.nt"
        os.mkfifo(pipe)
        gzip = subprocess.Popen(["sh", "-c", f"exec gzip -1 < {pipe.name} > {DUMP}"], cwd=data)
        try:
            output = self.java(
                "benchmark.generator.Generator",
                "-pc",
                str(products),
                "-s",
                "nt",
                "-fn",
                "dataset",
                "-dir",
                "td_data",
                cwd=data,
            )
            if gzip.wait() != 0:
                raise RuntimeError(f"gzip failed ({gzip.returncode})")
        finally:
            gzip.kill()  # still blocked opening the pipe if the generator failed before writing
            pipe.unlink()
        found = re.search(r"(\d+) triples generated", output)
        info = {
            "products": products,
            "triples": int(found.group(1)) if found else None,
            "seconds": round(time.perf_counter() - started, 2),
            "nt_gz_bytes": (data / DUMP).stat().st_size,
        }
        marker.write_text(json.dumps(info))
        return {**info, "dir": str(data)}

    def run(
        self, url: str, data: Path, usecase: str, clients: int, runs: int, warmups: int, timeout_s: float, xml: Path
    ) -> dict[str, Any]:
        """One measured run of a use case's query mixes: QMpH, per-query AQET, timeouts, errors."""
        xml.unlink(missing_ok=True)
        args = [
            "-idir",
            str(data / "td_data"),
            "-ucf",
            (self.home / USECASES[usecase]).as_uri(),
            "-runs",
            str(runs),
            "-w",
            str(warmups),
            "-t",
            str(int(timeout_s * 1000)),
            "-o",
            str(xml),
        ]
        if clients > 1:
            args += ["-mt", str(clients)]
        started = time.perf_counter()
        try:
            output = self.java("benchmark.testdriver.TestDriver", *args, url, timeout=runs * 3600)
        except RuntimeError as error:
            return {"error": str(error)[:1500]}
        wall = time.perf_counter() - started
        errors = [line.strip() for line in output.splitlines() if DRIVER_ERRORS.search(line)]
        result = parse_result(xml)
        return {**result, "wall_seconds": round(wall, 1), "errors": len(errors), "error_lines": errors[:5]}

    def qualify(self, url: str, data: Path, usecase: str, mixes: int, qual: Path) -> str:
        qual.unlink(missing_ok=True)
        self.java(
            "benchmark.testdriver.TestDriver",
            "-idir",
            str(data / "td_data"),
            "-ucf",
            (self.home / USECASES[usecase]).as_uri(),
            "-q",
            "-runs",
            str(mixes),
            "-qf",
            str(qual),
            url,
        )
        if not qual.exists():
            raise RuntimeError(f"{url}: the driver wrote no qualification file")
        return str(qual)

    def compare(self, reference: Path, test: Path, log: Path) -> dict[str, Any]:
        """Qualification of `test` against `reference`: per query, correct and total executions.

        The driver's own `Qualification` compares in order every result whose query text holds
        ORDER BY, even in a sub-select only (business intelligence Q7: the outer query is not
        ordered, so any order of its rows is right). Its verdicts are kept (`official`); a query it
        finds different is then compared again from the two files' rows: in order only if the
        outer query is ordered (an ORDER BY after its last closing brace), else as multisets."""
        output = self.java("benchmark.qualification.Qualification", "-ql", str(log), str(reference), str(test))
        text = log.read_text() if log.exists() else ""
        official: dict[str, list[int]] = {}
        for number, correct, total in re.findall(r"Query (\d+): correct/total executions: (\d+)/(\d+)", text):
            official[number] = [int(correct), int(total)]
        setup = [line for line in (output + text).splitlines() if line.startswith("Error:")]
        queries = {q: list(v) for q, v in official.items()}
        order_only: dict[str, int] = {}
        if any(c != t for c, t in official.values()) and not setup:
            mine, theirs = self.dump(reference), self.dump(test)
            if len(mine) != len(theirs):
                setup.append(f"Error: {len(mine)} results against {len(theirs)}")
            else:
                counts: dict[str, list[int]] = {}
                for a, b in zip(mine, theirs, strict=True):
                    if a["query"] != b["query"] or a["run"] != b["run"]:
                        setup.append(f"Error: query {a['query']} of run {a['run']} against {b['query']} of {b['run']}")
                        break
                    same = not a["timed_out"] and not b["timed_out"] and a["head"] == b["head"]
                    ordered = a["sorted"] and "order by" in a["text"].rsplit("}", 1)[-1].lower()
                    in_order = a["rows"] == b["rows"]
                    same = same and (in_order if ordered else sorted(a["rows"]) == sorted(b["rows"]))
                    entry = counts.setdefault(a["query"], [0, 0])
                    entry[0] += same
                    entry[1] += 1
                    if same and not in_order:
                        order_only[a["query"]] = order_only.get(a["query"], 0) + 1
                queries = {q: v for q, v in counts.items() if q in official}
        differ = sorted((q for q, (c, t) in queries.items() if c != t), key=int)
        return {
            "queries": queries,
            "differ": differ,
            "setup_errors": setup[:5],
            "ok": not differ and not setup,
            "official": official,
            "order_only": order_only,
        }

    def dump(self, qual: Path) -> list[dict[str, Any]]:
        """The results a qualification file holds (a Java object stream, read by bench/QualDump.java)."""
        out = qual.with_suffix(".txt")
        self.java(str(QUALDUMP), str(qual), str(out))
        results: list[dict[str, Any]] = []

        def unescape(text: str) -> str:
            return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text)

        for line in out.read_text(encoding="utf-8").splitlines():
            kind, _, rest = line.partition("\t")
            if kind == "R":
                run, query, ordered, timed_out = rest.split("\t")
                results.append(
                    {
                        "run": run,
                        "query": query,
                        "sorted": ordered == "true",
                        "timed_out": timed_out == "true",
                        "text": "",
                        "head": [],
                        "rows": [],
                    }
                )
            elif kind == "Q":
                results[-1]["text"] = unescape(rest)
            elif kind == "H":
                results[-1]["head"].append(unescape(rest))
            elif kind == "V":
                results[-1]["rows"].append(unescape(rest))
        return results


def parse_result(xml: Path) -> dict[str, Any]:
    root = ET.parse(xml).getroot()
    mix = root.find("querymix")
    assert mix is not None, xml

    def number(node: ET.Element, tag: str) -> float:
        text = node.findtext(tag)
        return float(text) if text not in (None, "") else float("nan")

    queries: dict[str, Any] = {}
    for query in root.iter("query"):
        nr = query.get("nr", "?")
        if query.findtext("executecount") in (None, "0"):
            continue
        queries[nr] = {
            "count": int(number(query, "executecount")),
            "aqet_s": number(query, "aqet"),
            "aqetg_s": number(query, "aqetg"),
            "max_s": number(query, "maxqet"),
            "avg_results": number(query, "avgresults"),
            "timeouts": int(number(query, "timeoutcount")),
        }
    return {
        "qmph": number(mix, "qmph"),
        "mixes": int(number(mix, "querymixruns")),
        "seconds": number(mix, "actualtotalruntime"),
        "queries": queries,
        "timeouts": sum(q["timeouts"] for q in queries.values()),
    }


# ---- one scale -------------------------------------------------------------------------------


def bench_scale(driver: Driver, products: int, args: argparse.Namespace) -> dict[str, Any]:
    generated = driver.generate(products)
    data = Path(generated.pop("dir"))
    log(f"pc {products}: {generated['triples']:,} triples")
    out = WORK / f"run-pc{products}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    scale: dict[str, Any] = {"data": generated, "systems": {}, "skipped": {}}
    with ExitStack() as stack:
        servers: list[Server] = []
        for name in args.systems:
            try:
                server = start(name, stack, data, out, args)
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                if name == "quanta":
                    raise
                scale["skipped"][name] = str(error)[-400:]
                log(f"{name}: left out: {error}")
                continue
            server.memory["after_load"] = memory(server.pid)
            servers.append(server)
            log(f"{name}: loaded in {server.load.get('seconds')} s, up at {server.url}")
            if name == "quanta":
                scale["quanta_store"] = quanta_store(server.load, generated["triples"])
                log(f"quanta's store: {scale['quanta_store']}")
        reference = next((s for s in servers if s.name == args.reference), None) or next(
            (s for s in servers if s.name != "quanta"), None
        )
        checked = servers if args.qualify_peers else [s for s in servers if s.name == "quanta" or s is reference]
        qualification = qualify(driver, checked, reference, data, out, args)
        for server in servers:
            entry: dict[str, Any] = {
                "url": server.url,
                "settings": server.settings,
                "load": server.load,
                "qualification": qualification.get(server.name),
                "runs": {u: {} for u in args.usecases},
            }
            scale["systems"][server.name] = entry
        scale["reference"] = reference.name if reference else None
        if not qualification.get("quanta", {}).get("ok", True):
            scale["failed"] = "quanta's answers differ from the reference's"
            return scale
        pairs = [(u, c) for c in args.clients for u in args.usecases]
        with Sampler(servers) as sampler:
            for i, (usecase, clients) in enumerate(pairs):
                order = servers[i % len(servers) :] + servers[: i % len(servers)]
                for server in order:
                    runs = max(args.runs[usecase], 2 * clients)
                    warmups = max(1, min(runs // 5, args.warmups[usecase]))
                    done = scale["systems"][server.name]["runs"][usecase]
                    reason = left_out(server.name, usecase, runs, done, args)
                    if reason:
                        done[str(clients)] = {"skipped": reason}
                        log(f"{server.name} {usecase} x{clients}: not run: {reason}")
                        continue
                    xml = out / f"{server.name}-{usecase}-{clients}.xml"
                    result = driver.run(server.url, data, usecase, clients, runs, warmups, args.timeout_s, xml)
                    done[str(clients)] = result
                    log(
                        f"{server.name} {usecase} x{clients}: QMpH {result.get('qmph')}, timeouts "
                        f"{result.get('timeouts')}, errors {result.get('errors', result.get('error'))}"
                    )
        time.sleep(2)
        for server in servers:
            server.memory["after_runs"] = memory(server.pid)
            server.memory["peak_during_runs"] = sampler.peak[server.name]
            scale["systems"][server.name]["memory"] = server.memory
    return scale


def skipped(name: str, usecase: str, args: argparse.Namespace) -> bool:
    """Whether --skip leaves the system's use case out, qualification and runs."""
    return f"{name}:{usecase}" in args.skip


def left_out(name: str, usecase: str, runs: int, done: dict[str, Any], args: argparse.Namespace) -> str | None:
    """Why a measured run is not started: listed in --skip, or longer than --max-run-minutes at the
    throughput of the system's last run of the use case (more clients rarely do better on 2 cores)."""
    if skipped(name, usecase, args):
        return "left out at this scale (--skip)"
    last = next((r for r in reversed(done.values()) if r.get("qmph")), None)
    if last and args.max_run_minutes:
        minutes = runs / last["qmph"] * 60
        if minutes > args.max_run_minutes:
            return f"{runs} mixes would take about {minutes:.0f} min at its last QMpH"
    return None


# Long queries of the workers' fragment over BSBM's largest classes, for what preemption costs at
# each scale: every offer (pages end at 1 MiB of results), then a scan and a join that find few
# rows (pages end at the 75 ms quantum).
BSBM = "http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/vocabulary/"
PREEMPTED = [
    f"SELECT * WHERE {{ ?o <{BSBM}product> ?p ; <{BSBM}vendor> ?v ; <{BSBM}price> ?price }}",
    f"SELECT ?o ?price WHERE {{ ?o <{BSBM}price> ?price FILTER(?price < 6) }}",
    f"SELECT * WHERE {{ ?r <{BSBM}reviewFor> ?p ; <{BSBM}rating1> 10 . ?p <{BSBM}productPropertyNumeric1> ?n "
    "FILTER(?n > 1990) }",
]


def quanta_store(load: dict[str, Any], triples: int) -> dict[str, Any]:
    """quanta's store at a scale: bytes per triple, opening, the private memory of an extra worker,
    and suspend + resume with the saved plans' sizes on PREEMPTED (bench/native.py's measures)."""
    hdt = Path(load["hdt"])
    opened = native.opening(hdt, 5, stores=("native",))
    preemption = native.suspend_resume(hdt, PREEMPTED, 30)["native"]
    return {
        "file_bytes": opened["file_bytes"],
        "hdt_bytes_per_triple": round(load["hdt_bytes"] / triples, 2),
        "index_bytes_per_triple": round(load["index_bytes"] / triples, 2),
        **opened["native"],
        "preemption": preemption,
    }


def qualify(
    driver: Driver, servers: list[Server], reference: Server | None, data: Path, out: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Each system's qualification against the reference's, per use case."""
    if reference is None:
        return {}
    files: dict[tuple[str, str], Path] = {}
    results: dict[str, Any] = {}
    for usecase in args.usecases:
        for server in [reference, *(s for s in servers if s is not reference)]:
            if skipped(server.name, usecase, args):
                continue
            try:
                files[server.name, usecase] = Path(
                    driver.qualify(
                        server.url, data, usecase, args.qualification_mixes, out / f"{server.name}-{usecase}.qual"
                    )
                )
            except (RuntimeError, subprocess.SubprocessError) as error:
                results.setdefault(server.name, {"ok": False, "usecases": {}})["usecases"][usecase] = {
                    "error": str(error)[:600]
                }
    for server in servers:
        entry = results.setdefault(server.name, {"ok": True, "usecases": {}})
        if server is reference:
            entry["reference"] = True
            continue
        for usecase in args.usecases:
            if skipped(server.name, usecase, args):
                entry["usecases"][usecase] = {"error": "not run (--skip)"}
                continue
            if (reference.name, usecase) not in files:  # not checked, not failed
                why = "left out (--skip)" if skipped(reference.name, usecase, args) else "failed"
                entry["usecases"][usecase] = {"error": f"{reference.name}'s qualification run {why}"}
                continue
            if (server.name, usecase) not in files:  # its own run failed: recorded above
                entry["ok"] = False
                continue
            qual_log = out / f"{server.name}-{usecase}.qual.log"
            compared = driver.compare(files[reference.name, usecase], files[server.name, usecase], qual_log)
            entry["usecases"][usecase] = compared
            entry["ok"] = entry["ok"] and compared["ok"]
        log(
            f"qualification {server.name} against {reference.name}: "
            + ", ".join(f"{u}: {'ok' if v.get('ok') else v}" for u, v in entry["usecases"].items())
        )
    return results


# ---- the report ------------------------------------------------------------------------------


def _reason(error: str, width: int = 80) -> str:
    """An error's first line, without the failed program's name."""
    lines = error.strip().splitlines() or [""]
    return lines[0].split("): ", 1)[-1].replace("|", "/")[:width]


def _mb(value: int | None) -> str:
    return "n/a" if not value else f"{value / 2**20:,.0f}"


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None or value != value:  # None or NaN
        return "n/a"
    return f"{value:,.{digits}f}"


def render_scale(products: int, scale: dict[str, Any], settings: dict[str, Any], intro: list[str]) -> list[str]:
    systems: dict[str, Any] = scale["systems"]
    names = [n for n in SYSTEMS if n in systems]
    data = scale["data"]
    lines = [f"### {products:,} products ({data['triples']:,} triples)", "", *intro]
    lines += [
        "| system | loader | load (s) | peak memory loading (MB) | store (MB) | idle after load: RSS / PSS (MB) "
        "| peak during runs: RSS / PSS (MB) | idle after runs: RSS / PSS (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        s = systems[name]
        load, mem = s["load"], s.get("memory", {})
        after, peak, steady = mem.get("after_load", {}), mem.get("peak_during_runs", {}), mem.get("after_runs", {})
        lines.append(
            f"| {name} | {load['loader']} | {_fmt(load.get('seconds'), 1)} | {_mb(load.get('peak_rss_bytes'))} "
            f"| {_mb(load.get('store_bytes'))} | {_mb(after.get('rss_bytes'))} / {_mb(after.get('pss_bytes'))} "
            f"| {_mb(peak.get('rss_bytes'))} / {_mb(peak.get('pss_bytes'))} "
            f"| {_mb(steady.get('rss_bytes'))} / {_mb(steady.get('pss_bytes'))} |"
        )
    for name, reason in scale.get("skipped", {}).items():
        lines.append(f"| {name} | left out: {reason.strip().splitlines()[-1][:160].replace('|', '/')} | | | | | | |")
    lines.append("")
    lines += render_store(systems.get("quanta", {}).get("load", {}), scale.get("quanta_store"))
    reference = scale.get("reference")
    verdicts = []
    for name in names:
        q = systems[name].get("qualification") or {}
        if q.get("reference"):
            continue
        if not q:
            verdicts.append(f"{name} (not checked)")
            continue
        uses = q.get("usecases", {})
        parts = []
        for usecase, v in uses.items():
            if "error" in v:
                parts.append(f"{usecase}: not run ({_reason(v['error'])})")
            elif v["ok"]:
                checked = sum(t for _, t in v["queries"].values())
                parts.append(f"{usecase}: all {checked} answers equal")
            else:
                parts.append(f"{usecase}: queries {', '.join(v['differ']) or '-'} differ {v['setup_errors'] or ''}")
            order_only = v.get("order_only") or {}
            if order_only:
                listed = ", ".join(f"Q{q} {n}" for q, n in sorted(order_only.items(), key=lambda item: int(item[0])))
                parts[-1] += f", rows in another order where the outer query is unordered: {listed}"
        verdicts.append(f"{name} ({'; '.join(parts)})")
    if reference:
        lines += [
            f"**Qualification** against {reference} ({settings.get('qualification_mixes', 15)} mixes per use case;"
            f" the driver compares SELECT answers, not DESCRIBE or CONSTRUCT): {', '.join(verdicts)}.",
            "",
        ]
    for usecase in settings["usecases"]:
        clients = settings["clients"]
        lines += [
            f"**{USECASE_TITLE[usecase]}**: query mixes per hour (QMpH; timeouts, errors)",
            "",
            "| system | " + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients) + " |",
            "|---|" + "---|" * len(clients),
        ]
        best: dict[int, tuple[float, str]] = {}
        for name in names:
            cells = []
            for c in clients:
                r = systems[name]["runs"].get(usecase, {}).get(str(c), {})
                if "skipped" in r:
                    cells.append(f"not run: {r['skipped']}")
                    continue
                if "qmph" not in r:
                    cells.append(f"failed: {_reason(str(r.get('error', 'not run')))}")
                    continue
                extra = f" ({r['timeouts']} t/o, {r['errors']} err)" if r["timeouts"] or r["errors"] else ""
                cells.append(f"{_fmt(r['qmph'])}{extra}")
                if name != "quanta" and r["qmph"] > best.get(c, (0.0, ""))[0]:
                    best[c] = (r["qmph"], name)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if "quanta" in systems and best:
            ratios = []
            for c in clients:
                ours = systems["quanta"]["runs"].get(usecase, {}).get(str(c), {}).get("qmph")
                if ours and c in best:
                    ratios.append(f"{ours / best[c][0]:.2f}x {best[c][1]}'s at {c}")
            lines += ["", f"quanta: {'; '.join(ratios)}."]
        # per-query average execution time at the fewest and the most clients
        lines += [
            "",
            f"{USECASE_TITLE[usecase]}: average query execution time per query (AQET, ms) at "
            + " and ".join(str(c) for c in sorted({clients[0], clients[-1]}))
            + " client(s)",
            "",
        ]
        columns = [(name, c) for c in sorted({clients[0], clients[-1]}) for name in names]
        lines += ["| query | " + " | ".join(f"{n} x{c}" for n, c in columns) + " |", "|---|" + "---|" * len(columns)]
        numbers = sorted(
            {q for n, c in columns for q in systems[n]["runs"].get(usecase, {}).get(str(c), {}).get("queries", {})},
            key=int,
        )
        for q in numbers:
            cells = []
            for n, c in columns:
                entry = systems[n]["runs"].get(usecase, {}).get(str(c), {}).get("queries", {}).get(q)
                cells.append(
                    "n/a"
                    if not entry
                    else _fmt(entry["aqet_s"] * 1000, 1) + (f" ({entry['timeouts']} t/o)" if entry["timeouts"] else "")
                )
            lines.append(f"| Q{q} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def render_store(load: dict[str, Any], store: dict[str, Any] | None) -> list[str]:
    """quanta's loader against its memory budget, and its store at this scale."""
    if not store or "estimated_peak_bytes" not in load:
        return []
    mib = 2**20
    p = store["preemption"]
    sr, plan, quantum = p["suspend_plus_resume_ms"], p["plan_bytes"], p["quantum_ms"]
    return [
        f"quanta at this scale: `quanta load` within {load['max_memory']} predicted a peak of "
        f"{_mb(load['estimated_peak_bytes'])} MB ({load['memory_estimate']}) and measured "
        f"{_mb(load['peak_rss_bytes'])} MB; HDT {store['hdt_bytes_per_triple']} and side index "
        f"{store['index_bytes_per_triple']} bytes per triple; opening {store['open_ms']['p50']:.1f} ms "
        f"(a fresh process, the files in the page cache); an extra worker that has read every triple adds "
        f"{store['second_worker_private_bytes'] / mib:,.1f} MiB of private memory "
        f"({store['second_worker_private_bytes'] / store['file_bytes']:.1%} of the file, the first "
        f"{store['first_worker_private_bytes'] / mib:,.1f} MiB)"
        + (f", measured again by `{store['command']}`. " if store.get("command") else ". ")
        + (
            f"Preemption on {len(PREEMPTED)} long queries (bench/bsbm.py's PREEMPTED, {p['pages']} pages at a "
            f"75 ms quantum or 1 MiB of results): suspend + resume p50 {sr['p50']:.3f} ms, p99 {sr['p99']:.3f} ms "
            f"({sr['p50'] / quantum['p50']:.2%} of a page's median {quantum['p50']:.1f} ms); saved plans p50 "
            f"{plan['p50']:,.0f} bytes, max {plan['max']:,.0f}."
            if sr
            else f"The {len(PREEMPTED)} long queries of bench/bsbm.py's PREEMPTED finish in one page each here."
        ),
        "",
    ]


def render(result: dict[str, Any], docs: Path = REPO / "docs" / "benchmarks.md") -> None:
    systems: dict[str, str] = {}
    for scale in result["scales"].values():
        for name, entry in scale["systems"].items():
            systems.setdefault(name, entry["settings"])
    body = [
        f"BSBM {BSBM_VERSION} from Maven Central. Its generator makes the data and the driver's parameters; each",
        "system loads the N-Triples dump with its own loader and all of them stay up, on the same 2 cores; the",
        "official test driver (`benchmark.testdriver.TestDriver`, the default seed) runs each use case's query",
        "mixes against one system at a time, the systems' order rotating from one (use case, clients) pair to the",
        "next, the driver itself on the same cores. QMpH counts mixes over the run's wall time (warm-up mixes not",
        "counted); AQET is a query's mean time. Memory: the server's processes summed (quanta: gateway, workers",
        "and Redis): RSS, and PSS, where a page shared by n processes (the HDT file mapped by every worker) counts",
        "1/n; *peak* is sampled every 0.5 s during the runs (less often where a sample takes long: a tenth of a",
        "core at most; the 284,000-product run below sampled every 0.5 s, which took half a core there, taken",
        "from every system alike). Each system as run:",
        "",
        *[f"- {name}: {text}" for name, text in systems.items()],
        "",
    ]
    for products, scale in result["scales"].items():
        s, m = scale.get("settings", result["settings"]), scale.get("machine", result["machine"])
        runs = "; ".join(
            f"{USECASE_TITLE[u].lower()}: {s['runs'][u]} mixes after {s['warmups'][u]} warm-up" for u in s["usecases"]
        )
        intro = [
            f"`{scale.get('command', result['command'])}` ({m['date']}, {m['cpu']}, {m['nproc']} cores, "
            f"{m['memory_gb']} GB, load average {m['load_average_at_start'][0]} at the start, Java {m['java']}, "
            f"quanta at {m['git_commit'][:10]}{' with local changes' if m['git_dirty'] else ''}): {runs} "
            f"(at least 2 mixes per client); a {s['timeout_s']:g} s timeout per query.",
            "",
        ]
        body += render_scale(int(products), scale, s, intro)
    body += ["![QMpH by clients, each system, each use case](img/bsbm.png)", ""]
    benchlib.replace_block(docs, "bsbm", "\n".join(body))
    _plot(result, docs.parent / "img" / "bsbm.png")


def _plot(result: dict[str, Any], image: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scales = list(result["scales"].items())
    usecases = [u for u in USECASES if any(u in sc.get("settings", result["settings"])["usecases"] for _, sc in scales)]
    figure, axes = plt.subplots(
        len(scales), len(usecases), figsize=(5.5 * len(usecases), 3.8 * len(scales)), squeeze=False
    )
    colors = {"quanta": "tab:blue", "fuseki": "tab:orange", "oxigraph": "tab:green", "virtuoso": "tab:red"}
    for row, (products, scale) in enumerate(scales):
        s = scale.get("settings", result["settings"])
        for col, usecase in enumerate(usecases):
            ax = axes[row][col]
            if usecase not in s["usecases"]:
                ax.set_axis_off()
                continue
            for name, entry in scale["systems"].items():
                points = [(c, entry["runs"].get(usecase, {}).get(str(c), {}).get("qmph")) for c in s["clients"]]
                xs = [c for c, q in points if q]
                ax.plot(xs, [q for _, q in points if q], marker="o", label=name, color=colors.get(name))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(s["clients"], [str(c) for c in s["clients"]])
            ax.set_xlabel("clients")
            ax.set_ylabel("QMpH")
            ax.set_title(f"{USECASE_TITLE[usecase]}, {int(products):,} products", fontsize=10)
            ax.legend(fontsize=8)
    figure.tight_layout()
    image.parent.mkdir(exist_ok=True)
    figure.savefig(image, dpi=100)


# ---- main ------------------------------------------------------------------------------------


def products_list(text: str) -> list[int]:
    """`1k,10k` or `1000,10000`."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        out.append(int(float(part[:-1]) * 1000) if part.endswith("k") else int(part))
    return out


def describe_machine() -> dict[str, Any]:
    machine = benchlib.machine({"quanta_gateway": "quanta-gateway"})
    version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    machine["java"] = re.sub(r'.*version "([^"]+)".*', r"\1", version)
    return machine


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument(
        "--products",
        type=products_list,
        default=[1000],
        help="BSBM scales, products (1k ≈ 0.37 M triples, 10k ≈ 3.5 M, 100k ≈ 35 M); default 1k",
    )
    parser.add_argument(
        "--clients",
        type=lambda t: [int(c) for c in t.split(",")],
        default=[1, 4],
        help="driver clients (-mt), e.g. 1,4,8,64; default 1,4",
    )
    parser.add_argument(
        "--systems",
        type=lambda t: t.split(","),
        default=list(SYSTEMS),
        help=f"among {','.join(SYSTEMS)} (quanta always runs); default all",
    )
    parser.add_argument("--usecases", type=lambda t: t.split(","), default=list(USECASES), help="explore,bi")
    parser.add_argument(
        "--reference",
        choices=["oxigraph", "fuseki", "virtuoso"],
        default="oxigraph",
        help="whose answers the qualification compares with (else the first peer up)",
    )
    parser.add_argument("--explore-runs", type=int, default=200, help="explore mixes per measured run")
    parser.add_argument("--bi-runs", type=int, default=20, help="business-intelligence mixes per measured run")
    parser.add_argument("--timeout-s", type=float, default=60, help="the driver's timeout per query (-t)")
    parser.add_argument("--workers", type=int, default=2, help="quanta's workers")
    parser.add_argument("--gateways", type=int, default=1, help="quanta's gateway processes")
    parser.add_argument("--quantum-ms", type=float, default=75)
    parser.add_argument("--fuseki", choices=["tdb2", "memory"], default="tdb2", help="Fuseki's storage")
    parser.add_argument("--fuseki-heap", default="4g", help="Fuseki's JVM heap (-Xmx)")
    parser.add_argument("--virtuoso-gb", type=float, default=2, help="memory for Virtuoso's buffers, GB")
    parser.add_argument(
        "--skip",
        type=lambda t: t.split(","),
        default=[],
        help="system:usecase pairs not measured (e.g. oxigraph:bi where one mix takes hours)",
    )
    parser.add_argument(
        "--max-run-minutes",
        type=float,
        default=0,
        help="leave out a run predicted longer than this from the system's last QMpH (0: no limit)",
    )
    parser.add_argument(
        "--quanta-load-memory", help="quanta load's memory budget (--max-memory; default: the memory available)"
    )
    parser.add_argument("--qualification-mixes", type=int, default=15, help="mixes per use case (the driver's 15)")
    parser.add_argument(
        "--no-peer-qualification",
        dest="qualify_peers",
        action="store_false",
        help="qualify quanta alone against the reference, not every peer too",
    )
    parser.add_argument(
        "--quick", action="store_true", help="100 products, 1 client, a few mixes (under 3 minutes); docs untouched"
    )
    parser.add_argument(
        "--store-only",
        action="store_true",
        help="only measure quanta's store again at --products (its HDT file kept from the last run), "
        "into --add-to's result",
    )
    parser.add_argument("--out", type=Path, help="where the JSON goes (default bench/results/bsbm.json)")
    parser.add_argument("--render", type=Path, help="only rewrite the docs from a saved result")
    parser.add_argument(
        "--add-to",
        type=Path,
        help="a saved result whose other scales are kept beside this run's (e.g. bench/results/bsbm.json)",
    )
    args = parser.parse_args()
    if args.render:
        render(json.loads(args.render.read_text()))
        return
    if args.store_only:
        if not args.add_to:
            parser.error("--store-only needs --add-to: the result whose scales are measured again")
        saved = json.loads(args.add_to.read_text())
        for products in args.products:
            scale = saved["scales"][str(products)]
            scale["quanta_store"] = quanta_store(scale["systems"]["quanta"]["load"], scale["data"]["triples"])
            scale["quanta_store"]["command"] = "python bench/bsbm.py " + " ".join(sys.argv[1:])
        args.add_to.write_text(json.dumps(saved, indent=1) + "\n")
        render(saved)
        return
    if args.quick:
        args.products, args.clients, args.explore_runs, args.bi_runs = [100], [1], 10, 2
        args.qualify_peers = False
    args.systems = ["quanta", *(s for s in args.systems if s in SYSTEMS and s != "quanta")]
    args.runs = {"explore": args.explore_runs, "bi": args.bi_runs}
    args.warmups = {"explore": max(1, args.explore_runs // 10), "bi": max(1, args.bi_runs // 10)}
    WORK.mkdir(parents=True, exist_ok=True)
    driver = Driver.fetch()
    machine = describe_machine()
    settings = {
        "clients": args.clients,
        "usecases": args.usecases,
        "runs": args.runs,
        "warmups": args.warmups,
        "timeout_s": args.timeout_s,
        "reference": args.reference,
        "fuseki": args.fuseki,
        "fuseki_heap": args.fuseki_heap,
        "virtuoso_gb": args.virtuoso_gb,
        "workers": args.workers,
        "gateways": args.gateways,
        "quantum_ms": args.quantum_ms,
        "qualification_mixes": args.qualification_mixes,
        "qualify_peers": args.qualify_peers,
        "skip": args.skip,
        "max_run_minutes": args.max_run_minutes,
    }
    command = "python bench/bsbm.py " + " ".join(sys.argv[1:]) if sys.argv[1:] else "make bench-bsbm"
    result: dict[str, Any] = {"command": command.strip(), "machine": machine, "settings": settings, "scales": {}}
    if args.add_to and args.add_to.exists():
        kept = json.loads(args.add_to.read_text())
        for products, scale in kept["scales"].items():  # each scale keeps its own command and settings
            scale.setdefault("settings", kept["settings"])
            scale.setdefault("machine", kept["machine"])
            scale.setdefault("command", kept["command"])
            result["scales"][products] = scale
    out = args.out or (WORK / "bsbm-quick.json" if args.quick else REPO / "bench" / "results" / "bsbm.json")
    failed = False
    for products in args.products:
        at_start = describe_machine()
        scale = bench_scale(driver, products, args)
        scale |= {"settings": settings, "machine": at_start, "command": command.strip()}
        result["scales"][str(products)] = scale
        result["scales"] = dict(sorted(result["scales"].items(), key=lambda item: int(item[0])))
        if scale.get("failed"):
            failed = True
            out = WORK.parent / "bsbm-failed.json"
        out.write_text(json.dumps(result, indent=1) + "\n")
        if failed:
            break
    print(f"results: {out}")
    if failed:
        print("quanta's answers differ from the reference's: see the qualification logs in", WORK, file=sys.stderr)
        sys.exit(1)
    if not args.quick and args.out is None:
        render(result)


if __name__ == "__main__":
    main()
