"""`quanta`, the console script: what a fresh `quanta query` imports (issue 18: one query
in a process of its own pays for every module it imports)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
QUANTA = Path(sys.executable).with_name("quanta")  # the console script a user runs
QUERY = """SELECT ?v0 ?v2 WHERE {
  ?v0 <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?v2 .
  ?v0 <http://db.uwaterloo.ca/~galuc/wsdbm/subscribes> <http://db.uwaterloo.ca/~galuc/wsdbm/Website15> .
}"""
# What a query that is never saved has no use for: protobuf's message classes (a plan needs
# them to be saved or loaded), the expression evaluator (FILTER and BIND), what only the other
# commands or a parse thread need, and stdlib modules that cost milliseconds to import
# (pathlib brings urllib.parse and ipaddress).
HEAVY = {
    "google.protobuf.descriptor_pool",
    "quanta.plan.v1.plan_pb2",
    "quanta.sparql.expressions",
    "quanta.engine.operators.expression",
    "concurrent.futures",
    "ctypes",
    "logging",
    "statistics",
    "pathlib",
    "asyncio",
    "email",
    "http.client",
    "urllib.request",
    "xml.sax",
    "importlib.metadata",
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    copy = tmp_path_factory.mktemp("cli") / SAMPLE.name  # a copy: the store writes its side index beside it
    shutil.copy(SAMPLE, copy)
    return str(copy)


def imported(*args: str) -> tuple[dict[str, Any], set[str]]:
    """Run `quanta *args` in a fresh interpreter: its JSON output and the modules it imported
    (`python -X importtime` names each on stderr)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", str(QUANTA), *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    modules = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return json.loads(out.stdout), modules


def test_a_query_that_never_suspends_imports_nothing_heavy(dataset: str) -> None:
    result, modules = imported("query", "--dataset", dataset, "--quantum-ms", "inf", QUERY)
    assert result["results"]["bindings"]
    assert "quanta.engine.plan" in modules  # the engine ran in this process
    assert modules & HEAVY == set()


def test_a_suspended_query_imports_protobuf(dataset: str) -> None:
    """The plan saved every quantum (1 µs ones) needs its messages: what the test above sees absent."""
    result, modules = imported("query", "--dataset", dataset, "--quantum-ms", "0.001", QUERY)
    assert result["results"]["bindings"]
    assert {"quanta.plan.v1.plan_pb2", "google.protobuf.descriptor_pool"} <= modules


def test_an_expression_imports_its_evaluator(dataset: str) -> None:
    query = QUERY.replace("}", "FILTER(?v2 != ?v0) }")
    result, modules = imported("query", "--dataset", dataset, "--quantum-ms", "inf", query)
    assert result["results"]["bindings"]
    assert {"quanta.sparql.expressions", "quanta.engine.operators.expression"} <= modules
