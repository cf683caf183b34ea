"""The retired storage backend `pyhdt`, as existing settings still name it: a catalog's
`backend = "pyhdt"`, QUANTA_BACKEND=pyhdt and `quanta query --backend pyhdt` keep working,
run on the native store (the engine's only one) and say once per process that the setting is
retired. Real parts: a redis-server, a `quanta worker` and a `quanta query` process, a copy of
the sample HDT."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from quanta.common.catalog import load_catalog
from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql import term_rows
from quanta.worker.cli import open_dataset

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
LIKES = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }"
RETIRED = "the storage backend is retired"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """Three names for one file: the retired backend named, none named (QUANTA_BACKEND decides),
    native named. The side index is left out: the first open builds it."""
    shutil.copy(SAMPLE, tmp_path / "watdiv-100k.hdt")
    path = tmp_path / "catalog.toml"
    path.write_text(
        "".join(
            f'[datasets.{name}]\npath = "watdiv-100k.hdt"\nquantum_ms = 5\nmax_results = 50\n{extra}'
            for name, extra in [("retired", 'backend = "pyhdt"\n'), ("by-env", ""), ("native", 'backend = "native"\n')]
        )
    )
    return path


def all_rows(submit, client: redis.Redis, dataset: str) -> list[tuple[str | None, ...]]:
    """Every row of LIKES on a dataset, page after page (plans by value)."""
    found: list[tuple[str | None, ...]] = []
    task = q.Task(dataset=dataset, query=LIKES, rows=q.ROW_FORMAT_TERMS, plan_mode=q.PLAN_MODE_VALUE)
    while True:
        reply = submit(client, task)
        assert reply.HasField("page"), reply.error.message
        page = reply.page
        found += term_rows.decode(page.rows.terms, page.rows.cells, len(page.head), page.results)
        if not page.WhichOneof("next"):
            return sorted(found)
        task = q.Task(dataset=dataset, plan=page.plan, rows=q.ROW_FORMAT_TERMS, plan_mode=q.PLAN_MODE_VALUE)


def test_a_catalog_naming_pyhdt_opens_the_native_store(server, catalog: Path) -> None:
    retired = load_catalog(catalog)["retired"]
    assert retired.backend == "pyhdt"
    index = catalog.parent / "watdiv-100k.hdt.quanta-index.v1"
    assert not index.exists()
    store = open_dataset(retired, redis.Redis.from_url(server.url))
    assert store.backend == "native" and store.name == "retired" and store.triples == 104_072
    assert index.exists(), "built under the Redis lock, as for a native dataset"


def test_a_worker_runs_the_retired_settings_on_the_native_store_and_warns_once(
    server, start_worker, submit, catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTA_BACKEND", "pyhdt")  # the dataset that names no backend takes it
    worker = start_worker()  # opens every dataset before it registers
    client = redis.Redis.from_url(server.url)
    answers = {name: all_rows(submit, client, name) for name in ("retired", "by-env", "native")}
    assert len(answers["native"]) > 50, "several pages"
    assert answers["retired"] == answers["native"] and answers["by-env"] == answers["native"]
    worker.terminate()
    _, err = worker.communicate(timeout=30)
    records = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    warnings = [r for r in records if RETIRED in r["msg"]]
    assert len(warnings) == 1, warnings  # two datasets and the environment name it: one warning
    assert warnings[0]["level"] == "warning" and warnings[0]["backend"] == "pyhdt"


def quanta_query(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quanta.cli.main", "query", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_quanta_query_still_takes_backend_pyhdt(tmp_path: Path) -> None:
    dataset = tmp_path / "watdiv-100k.hdt"
    shutil.copy(SAMPLE, dataset)
    common = ["--dataset", str(dataset), "--quantum-ms", "0.05", "--format", "tsv", LIKES]
    native = quanta_query("--backend", "native", *common)
    assert native.returncode == 0, native.stderr
    assert native.stdout.count("\n") > 50 and RETIRED not in native.stderr
    for retired in (
        quanta_query("--backend", "pyhdt", *common),
        quanta_query(*common, env={"QUANTA_BACKEND": "pyhdt"}),
    ):
        assert retired.returncode == 0, retired.stderr
        assert retired.stdout == native.stdout
        assert retired.stderr.count(RETIRED) == 1, retired.stderr
    unknown = quanta_query("--backend", "hdt", *common)
    assert unknown.returncode == 2 and "invalid choice: 'hdt'" in unknown.stderr
