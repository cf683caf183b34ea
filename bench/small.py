"""Small queries through the SPARQL endpoint (issue 18): the 200 WatDiv basic queries on
watdiv-1m, one client, quanta's `/sparql` (`quanta up`, 75 ms quantum) against Oxigraph's
server (`oxigraph serve-read-only` over its RocksDB store), both up at once, each query sent
to one and then the other (who goes first alternates), never concurrently.

    python bench/small.py [--runs 5] [--workers 2]

Per query: the median over `runs` of the time to read the whole answer (SPARQL JSON results,
one keep-alive connection per server), row counts checked equal. The headline is the
geometric mean over the queries of Oxigraph's time over quanta's (above 1: quanta faster).
Writes bench/results/small.json and the `small` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import benchlib  # bench/, the script's own folder
import peers  # the peers' loaders and servers (bench/peers.py)

from quanta.common.redis_server import free_port
from quanta.testkit.data import shared_dir

WATDIV = shared_dir() / "datasets" / "watdiv"
RESULTS = Path(__file__).parent / "results" / "small.json"
DOC = Path(__file__).parent.parent / "docs" / "benchmarks.md"


class Endpoint:
    """A SPARQL endpoint read over one keep-alive connection."""

    def __init__(self, url: str) -> None:
        address = urlsplit(url)
        assert address.hostname is not None
        self.path = address.path
        self.connection = http.client.HTTPConnection(address.hostname, address.port, timeout=600)

    def ask(self, query: str) -> tuple[float, int]:
        """(seconds to the last byte, rows)."""
        body = urlencode({"query": query})
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/sparql-results+json"}
        for attempt in (1, 2):  # a server may have closed the idle connection: once more, reconnected
            started = time.perf_counter()
            try:
                self.connection.request("POST", self.path, body, headers)
                response = self.connection.getresponse()
                data = response.read()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                self.connection.close()
                if attempt == 2:
                    raise
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {data[:300]!r}")
        return elapsed, len(json.loads(data)["results"]["bindings"])


def start_oxigraph(stack: ExitStack, work: Path) -> str:
    binary = peers.helper("bsbm.sh", "oxigraph")
    source = work / "watdiv-1m.nt"
    with gzip.open(WATDIV / "watdiv-1m.nt.gz") as packed, open(source, "wb") as plain:
        shutil.copyfileobj(packed, plain)
    db = work / "oxigraph"
    subprocess.run([binary, "load", "--location", str(db), "--file", str(source)], check=True, capture_output=True)
    port = free_port()
    command = [binary, "serve-read-only", "--location", str(db), "--bind", f"127.0.0.1:{port}"]
    process = stack.enter_context(peers.running(command, work / "oxigraph.log"))
    url = f"http://127.0.0.1:{port}/query"
    peers.wait_sparql(url, process)
    return url


def measure(urls: dict[str, str], queries: dict[str, str], runs: int) -> dict[str, Any]:
    endpoints = {name: Endpoint(url) for name, url in urls.items()}
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rows: dict[str, dict[str, int]] = defaultdict(dict)
    names = list(endpoints)
    for name, query in queries.items():  # a warm-up run of each, untimed
        for server in names:
            rows[name][server] = endpoints[server].ask(query)[1]
        if len(set(rows[name].values())) != 1:
            raise RuntimeError(f"{name}: the servers' row counts differ: {rows[name]}")
    for run in range(runs):
        for i, (name, query) in enumerate(queries.items()):
            order = names if (i + run) % 2 == 0 else names[::-1]
            for server in order:
                times[name][server].append(endpoints[server].ask(query)[0])
        print(f"run {run + 1} of {runs}", file=sys.stderr)
    per_query = {
        name: {"rows": rows[name][names[0]], **{s: statistics.median(t) * 1000 for s, t in by.items()}}
        for name, by in times.items()
    }
    ratios = [q["oxigraph"] / q["quanta"] for q in per_query.values()]
    return {
        "per_query_ms": per_query,
        "geomean_oxigraph_over_quanta": math.exp(statistics.fmean(math.log(r) for r in ratios)),
        "quanta_faster": sum(r > 1 for r in ratios),
        "total_ms": {s: sum(q[s] for q in per_query.values()) for s in names},
        "p50_ms": {s: statistics.median(q[s] for q in per_query.values()) for s in names},
    }


def render(r: dict[str, Any]) -> str:
    m, s = r["machine"], r["small"]
    by_template: dict[str, list[dict[str, float]]] = defaultdict(list)
    for name, q in s["per_query_ms"].items():
        by_template[name.split("_")[0]].append(q)
    lines = [
        f"Produced by `python bench/small.py{r['argv']}` on {m['date'][:10]} (git {m['git_commit'][:10]}"
        f"{' + local changes' if m['git_dirty'] else ''}; {m['nproc']} cores, load average at start "
        f"{m['load_average_at_start'][0]}): quanta `quanta up` with {r['workers']} workers, Oxigraph "
        f"{peers.OXIGRAPH_VERSION} `serve-read-only`; per query the median of {r['runs']} runs, ms. Raw "
        "figures: `bench/results/small.json`.",
        "",
        f"**Geometric mean of Oxigraph's time over quanta's: {s['geomean_oxigraph_over_quanta']:.2f}** (above 1: "
        f"quanta faster); quanta faster on {s['quanta_faster']} of {len(s['per_query_ms'])} queries; per-query "
        f"median quanta {s['p50_ms']['quanta']:.2f} ms, Oxigraph {s['p50_ms']['oxigraph']:.2f} ms; totals "
        f"quanta {s['total_ms']['quanta']:,.0f} ms, Oxigraph {s['total_ms']['oxigraph']:,.0f} ms.",
        "",
        "| template | queries | rows (median) | quanta ms (median) | Oxigraph ms (median) | Oxigraph / quanta |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for template in sorted(by_template, key=lambda t: (t[0], int(t[1:]))):
        qs = by_template[template]
        ours, theirs = statistics.median(q["quanta"] for q in qs), statistics.median(q["oxigraph"] for q in qs)
        lines.append(
            f"| {template} | {len(qs)} | {statistics.median(q['rows'] for q in qs):,.0f} | {ours:.2f} | "
            f"{theirs:.2f} | {theirs / ours:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    queries = {p.stem: p.read_text() for p in sorted((WATDIV / "queries" / "basic").glob("*.rq"))}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        work = Path(tmp)
        hdt = work / "watdiv-1m.hdt"  # the native store writes its side index beside the file
        shutil.copy(WATDIV / "watdiv-1m.hdt", hdt)
        limits = {"QUANTA_SPARQL_QUERY_RATE": "0", "QUANTA_SPARQL_MAX_QUERIES": "0", "QUANTA_ACCESS_LOG": "0"}
        up = benchlib.quanta_up(hdt, workers=args.workers, quantum_ms=75, env=limits)
        quanta_url, _ = stack.enter_context(up)
        urls = {"quanta": f"{quanta_url}/sparql", "oxigraph": start_oxigraph(stack, work)}
        r = {
            "argv": "".join(f" {a}" for a in sys.argv[1:]),
            "machine": benchlib.machine({"quanta_native": "quanta-native"}),
            "runs": args.runs,
            "workers": args.workers,
            "small": measure(urls, queries, args.runs),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(r, indent=1) + "\n")
    benchlib.replace_block(DOC, "small", render(r))
    print(render(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
