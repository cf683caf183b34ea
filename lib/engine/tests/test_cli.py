"""`quanta query`, the stable command-line interface, as a real process."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
QUERY = """SELECT ?v0 ?v2 WHERE {
  ?v0 <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?v2 .
  ?v0 <http://db.uwaterloo.ca/~galuc/wsdbm/subscribes> <http://db.uwaterloo.ca/~galuc/wsdbm/Website15> .
}"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    copy = tmp_path_factory.mktemp("cli") / "watdiv-100k.hdt"
    copy.write_bytes(SAMPLE.read_bytes())
    return str(copy)


def quanta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "quanta.cli.main", *args], capture_output=True, text=True, timeout=120)


def test_json_results_and_stats(dataset: str, tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    out = quanta("query", "--dataset", dataset, "--quantum-ms", "0.001", "--stats", str(stats), QUERY)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["head"]["vars"] == ["v0", "v2"]
    assert len(result["results"]["bindings"]) > 0
    assert result["results"]["bindings"][0]["v0"]["type"] == "uri"
    figures = json.loads(stats.read_text())
    assert figures["results"] == len(result["results"]["bindings"])
    assert figures["quanta"] > 1  # 1 µs quanta: suspended at its first clock check (64 steps of 114)
    for key in ("suspend_ms", "resume_ms", "plan_bytes", "overshoot_ms"):
        assert set(figures[key]) == {"p50", "p99", "max", "mean"}
    assert figures["plan_bytes"]["max"] > 0
    assert figures["total_ms"] >= figures["parse_ms"] > 0


@pytest.mark.parametrize("fmt", ["xml", "csv", "tsv"])
def test_other_formats_agree_with_json(dataset: str, fmt: str, tmp_path: Path) -> None:
    query_file = tmp_path / "q.rq"
    query_file.write_text(QUERY)
    reference = json.loads(quanta("query", "--dataset", dataset, f"@{query_file}").stdout)
    out = quanta("query", "--dataset", dataset, "--quantum-ms", "inf", "--format", fmt, f"@{query_file}")
    assert out.returncode == 0, out.stderr
    count = len(reference["results"]["bindings"])
    if fmt == "xml":
        assert out.stdout.count("<result>") == count
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(out.stdout)))
        assert rows[0] == ["v0", "v2"] and len(rows) == count + 1
    else:
        lines = out.stdout.splitlines()
        assert lines[0] == "?v0\t?v2" and len(lines) == count + 1
        assert lines[1].startswith("<http://")


def test_ask(dataset: str) -> None:
    out = quanta("query", "--dataset", dataset, "ASK { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }")
    assert json.loads(out.stdout) == {"head": {}, "boolean": True}


def test_syntax_error_is_one_line_with_position(dataset: str) -> None:
    out = quanta("query", "--dataset", dataset, "SELECT * WHERE {\n ?s ?p }")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "line 2, column" in out.stderr


def test_unsupported_operator_is_named(dataset: str) -> None:
    out = quanta("query", "--dataset", dataset, "SELECT DISTINCT ?s WHERE { ?s ?p ?o }")
    assert out.returncode == 1 and "DISTINCT" in out.stderr


def test_missing_dataset(tmp_path: Path) -> None:
    out = quanta("query", "--dataset", str(tmp_path / "nope.hdt"), "ASK {}")
    assert out.returncode == 1 and "nope.hdt" in out.stderr
