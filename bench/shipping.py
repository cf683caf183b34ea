"""Function shipping against data shipping (issue 19): GROUP BY, aggregates, DISTINCT and ORDER BY
... LIMIT run on the workers in partial answers (each quantum's distinct rows with their counts, or
its first k rows, merged by the client) or in the client over every row the workers ship.

    python bench/shipping.py [--dataset 10m|1m|100k] [--timeout 120]

`quanta up` (2 workers, 75 ms quantum) over a copy of the WatDiv file ($QUANTA_WATDIV, else
../shared). Each query runs through the smart client over `/v1` (HTTP) with shipping on and off
(requests, bytes of the pages, seconds), then through `/sparql` as a SPARQL client sends it (the
endpoint ships). The answers of the two client runs must be the same multiset. Writes
bench/results/shipping.json and the `shipping` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import benchlib  # bench/, the script's own folder

from quanta.client.transport import QueryError
from quanta.testkit.data import shared_dir

REPO = benchlib.REPO
WATDIV = Path(os.environ.get("QUANTA_WATDIV", shared_dir() / "datasets" / "watdiv"))
RESULTS = REPO / "bench" / "results" / "shipping.json"
DOCS = REPO / "docs" / "benchmarks.md"
P = (
    "PREFIX wsdbm: <http://db.uwaterloo.ca/~galuc/wsdbm/> PREFIX sorg: <http://schema.org/> "
    "PREFIX rev: <http://purl.org/stuff/rev#> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
)
QUERIES = {
    "count everything": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "group by predicate": "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p",
    "count distinct subjects": "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s ?p ?o }",
    "likes per product": "SELECT ?p (COUNT(*) AS ?n) WHERE { ?u wsdbm:likes ?p } GROUP BY ?p",
    "distinct liked products": "SELECT DISTINCT ?p WHERE { ?u wsdbm:likes ?p }",
    "friends per nationality (rows shipped)": (
        "SELECT ?c (COUNT(?f) AS ?n) (COUNT(DISTINCT ?u) AS ?users) "
        "WHERE { ?u wsdbm:friendOf ?f . ?f sorg:nationality ?c } GROUP BY ?c"
    ),
    "ratings": (
        "SELECT ?r (COUNT(*) AS ?n) (SUM(xsd:integer(?r)) AS ?sum) (AVG(xsd:integer(?r)) AS ?avg) "
        "WHERE { ?v rev:rating ?r } GROUP BY ?r HAVING (COUNT(*) > 10)"
    ),
    "ratings and a review each (MIN beside COUNT)": (
        "SELECT ?r (COUNT(*) AS ?n) (MIN(?v) AS ?first) WHERE { ?v rev:rating ?r } GROUP BY ?r"
    ),
    "top 10 followed": "SELECT ?s ?o WHERE { ?s wsdbm:follows ?o } ORDER BY ?o LIMIT 10",
    "top 10 reviews by rating": (
        "SELECT ?v ?r WHERE { ?v rev:rating ?r ; rev:reviewer ?u } ORDER BY DESC(xsd:integer(?r)) ?v LIMIT 10"
    ),
}


async def client_run(url: str, query: str, ship: bool, timeout_s: float) -> dict[str, Any]:
    """The smart client's run, shipping or not; a refusal is a figure too."""
    try:
        return await benchlib.run_client(url, query, timeout_s, ship=ship)
    except QueryError as error:
        return {"error": error.kind.slug, "status": error.kind.status, "message": error.message}


def endpoint_run(url: str, query: str, timeout_s: float) -> dict[str, Any]:
    """The query as a SPARQL client sends it: GET /sparql, TSV, read to the end."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=timeout_s)
    started = time.perf_counter()
    try:
        connection.request(
            "GET", "/sparql?" + urlencode({"query": query}), headers={"Accept": "text/tab-separated-values"}
        )
        response = connection.getresponse()
        body = response.read()
    except TimeoutError:
        return {"timeout_s": timeout_s}
    finally:
        connection.close()
    if response.status != 200:
        return {"status": response.status, "error": body[:300].decode(errors="replace")}
    return {"seconds": round(time.perf_counter() - started, 3), "rows": body.count(b"\n") - 1}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="10m", choices=["100k", "1m", "10m"])
    parser.add_argument("--timeout", type=float, default=120, help="seconds a query may take")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--render", type=Path, help="only rewrite the docs block from a saved result")
    args = parser.parse_args()
    if args.render:
        benchlib.replace_block(DOCS, "shipping", render(json.loads(args.render.read_text())))
        return 0
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        dataset = Path(tmp) / f"watdiv-{args.dataset}.hdt"
        shutil.copy(WATDIV / dataset.name, dataset)  # the store writes its side index beside the file
        with benchlib.quanta_up(dataset, workers=2, quantum_ms=75) as (url, _):
            for name, text in QUERIES.items():
                query = P + text
                run = {
                    "shipped": asyncio.run(client_run(url, query, True, args.timeout)),
                    "rows shipped": asyncio.run(client_run(url, query, False, args.timeout)),
                    "/sparql": endpoint_run(url, query, args.timeout),
                }
                runs[name] = run
                print(f"{name:34} {run}", file=sys.stderr)
    mismatches = [
        name for name, run in runs.items()
        if "digest" in run["rows shipped"] and run["shipped"].get("digest") != run["rows shipped"]["digest"]
    ]  # fmt: skip
    report = {
        "machine": benchlib.machine({"quanta_client": "quanta-client"}),
        "argv": " ".join(sys.argv[1:]),
        "dataset": f"watdiv-{args.dataset}",
        "queries": QUERIES,
        "runs": runs,
        "mismatches": mismatches,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    if mismatches:
        print(f"answers differ with and without shipping: {mismatches}", file=sys.stderr)
        return 1
    benchlib.replace_block(DOCS, "shipping", render(report))
    return 0


def _cell(result: dict[str, Any], key: str, unit: float = 1, digits: int = 2) -> str:
    if "timeout_s" in result:
        return f"> {result['timeout_s']:g} s" if key == "seconds" else "-"
    if key not in result:
        return f"{result['status']} {result.get('error', '')}".strip() if "status" in result else "-"
    value = result[key] / unit
    return f"{value:,.{digits}f}" if digits else f"{value:,.0f}"


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"`python bench/shipping.py {report['argv']}`".replace(" `", "`"),
        "",
        f"On {report['dataset']}, `quanta up` (2 workers, 75 ms quantum): each query through the smart client "
        "over `/v1` with GROUP BY, DISTINCT and ORDER BY ... LIMIT shipped to the workers (partial answers) and "
        "with every row "
        "shipped to the client instead, then through `/sparql` (which ships). Bytes: the pages' response "
        f"bodies. Both client runs gave the same answer. {m['cpu']}, {m['nproc']} cores, {m['date'][:10]}, "
        f"commit {m['git_commit'][:10]}{' (changes not committed)' if m['git_dirty'] else ''}.",
        "",
        "| query | shipped s | rows shipped s | shipped requests | rows shipped requests "
        "| shipped MB | rows shipped MB | `/sparql` s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, run in report["runs"].items():
        shipped, rows, endpoint = run["shipped"], run["rows shipped"], run["/sparql"]
        lines.append(
            f"| {name} | {_cell(shipped, 'seconds', digits=3)} | {_cell(rows, 'seconds', digits=3)} "
            f"| {_cell(shipped, 'requests', digits=0)} | {_cell(rows, 'requests', digits=0)} "
            f"| {_cell(shipped, 'bytes', 1e6, 3)} | {_cell(rows, 'bytes', 1e6, 3)} "
            f"| {_cell(endpoint, 'seconds', digits=3)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
