"""A short, bounded Locust run against a real service this test starts (Redis with its
append-only file, two workers, the gateway) on watdiv-1m: each user class, headless, CSV
output; every query's row count is checked against results.tsv (Locust exits 1 on any
failure, a wrong count included)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quanta.common.redis_server import free_port

LOADTEST = Path(__file__).resolve().parents[2] / "loadtest"
sys.path.insert(0, str(LOADTEST))

import service  # noqa: E402  (loadtest/)
import workload  # noqa: E402

HDT = workload.watdiv_dir() / "watdiv-1m.hdt"
pytestmark = pytest.mark.skipif(not HDT.exists(), reason=f"{HDT} is missing")


@pytest.fixture(scope="module")
def quanta() -> Iterator[service.Quanta]:
    # a 10 ms quantum: the heavier queries are suspended and resumed many times
    with service.quanta(HDT, workers=2, quantum_ms=10) as svc:
        yield svc


def locust(tmp: Path, host: str, user: str, *options: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "locust", "-f", str(LOADTEST / "locustfile.py"), "--host", host,
               "--headless", "--run-time", "90s", "--passes", "1", "--csv", str(tmp / "run"), "--only-summary",
               "--query-log", str(tmp / "queries.jsonl"), "--counts-out", str(tmp / "counts.json"),
               *options, user]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (tmp / "run_stats.csv").open() as f:
        stats = {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}
    queries = [json.loads(line) for line in (tmp / "queries.jsonl").read_text().splitlines()]
    return {"counts": json.loads((tmp / "counts.json").read_text()), "stats": stats, "queries": queries}


def test_quanta_user_basic_mix(quanta: service.Quanta, tmp_path: Path) -> None:
    run = locust(tmp_path, quanta.url, "QuantaUser", "-u", "3", "-r", "3", "--workload", "basic")
    counts, stats, queries = run["counts"], run["stats"], run["queries"]
    assert counts["queries"] == counts["ok"] == 60  # 3 clients x 20 templates, every count right
    assert counts["quanta"] > counts["queries"]  # some queries took several quanta
    assert {q["client"] for q in queries} == {0, 1, 2}
    assert len({tuple(q["id"] for q in queries if q["client"] == c) for c in range(3)}) == 3  # a workload each
    c3 = [q for q in queries if q["name"] == "C3"]
    assert all(q["rows"] == 31_802 and q["requests"] > 1 and q["first_s"] < q["total_s"] for q in c3)
    for kind in ("quantum", "query", "first-result"):
        assert "C3" in {name for (t, name) in stats if t == kind}, kind


def test_quanta_user_optional_mix(quanta: service.Quanta, tmp_path: Path) -> None:
    run = locust(tmp_path, quanta.url, "QuantaUser", "-u", "2", "-r", "2", "--workload", "optional")
    assert run["counts"]["queries"] == run["counts"]["ok"] == 30  # 2 clients x 15 templates
    assert all(q["name"].startswith("optional:") for q in run["queries"])


def test_sparql_user_on_the_endpoint(quanta: service.Quanta, tmp_path: Path) -> None:
    run = locust(tmp_path, quanta.url, "SparqlUser", "-u", "2", "-r", "2", "--workload", "basic")
    assert run["counts"]["queries"] == run["counts"]["ok"] == 40
    assert run["counts"]["requests"] == 40  # one request per query


def test_workload_file_on_the_sample(tmp_path: Path) -> None:
    """What the Kubernetes Job runs by default: a workload file, counted on the bundled sample."""
    sample = LOADTEST.parent / "data" / "watdiv-100k.hdt"
    with service.quanta(sample, workers=1, dataset="watdiv-100k") as svc:
        file = LOADTEST / "workloads" / "basic-watdiv-100k.jsonl"
        run = locust(tmp_path, svc.url, "QuantaUser", "-u", "2", "-r", "2", "--workload", str(file),
                     "--dataset", "watdiv-100k")  # fmt: skip
    assert run["counts"]["queries"] == run["counts"]["ok"] == 40


def test_distributed_counts_reach_the_master(quanta: service.Quanta, tmp_path: Path) -> None:
    """A master and two workers: each worker's queries and quanta are counted on the master,
    and the run ends when every client of every worker has finished its pass."""
    base = [sys.executable, "-m", "locust", "-f", str(LOADTEST / "locustfile.py"), "--host", quanta.url]
    port = free_port()
    master = subprocess.Popen([*base, "--master", "--master-bind-port", str(port), "--headless", "--expect-workers",
                               "2", "-u", "4", "-r", "4", "--run-time", "90s", "--passes", "1", "--only-summary",
                               "--counts-out", str(tmp_path / "counts.json"), "--query-log",
                               str(tmp_path / "queries.jsonl"), "QuantaUser"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    # the master hands its options to the workers; each writes its query log as FILE.<worker index>
    workers = [subprocess.Popen([*base, "--worker", "--master-port", str(port), "QuantaUser"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]  # fmt: skip
    try:
        output, _ = master.communicate(timeout=120)
    finally:
        for w in workers:
            w.wait(timeout=30)
    assert master.returncode == 0, output[-3000:]
    counts = json.loads((tmp_path / "counts.json").read_text())
    assert counts["queries"] == counts["ok"] == 80  # 4 clients (2 per worker) x 20 templates
    logged = [json.loads(line) for f in tmp_path.glob("queries.jsonl.*") for line in f.read_text().splitlines()]
    assert len(logged) == 80 and counts["quanta"] == sum(q["requests"] for q in logged)
    assert len({q["client"] for q in logged}) == 4  # every client its own (worker index x 100,000 + n)
