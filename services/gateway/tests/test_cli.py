"""`quanta gateway` as a process: refuses a bad config, and with several uvicorn processes
shares one dev secret and sums metrics across processes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from quanta.common.redis_server import free_port
from quanta.gateway import cli
from quanta.testkit.gateway import paging_handler


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """`cli.main` configures the process's logging, onto this test's captured stderr (closed after
    it): later tests would log into a closed file."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_refuses_to_start_without_a_secret(catalog: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("QUANTA_SECRET_KEYS", raising=False)
    monkeypatch.delenv("QUANTA_DEV", raising=False)
    assert cli.main(["--catalog", str(catalog)]) == 2
    assert "QUANTA_SECRET_KEYS is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    "keys", ["nokid", "k1:short", "k1:0123456789abcdef,k1:0123456789abcdef", "bad kid!:0123456789abcdef"]
)
def test_refuses_bad_secret_keys(catalog: Path, monkeypatch, capsys, keys: str) -> None:
    monkeypatch.setenv("QUANTA_SECRET_KEYS", keys)
    assert cli.main(["--catalog", str(catalog)]) == 2
    assert "QUANTA_SECRET_KEYS" in capsys.readouterr().err


def test_refuses_a_bad_catalog(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("QUANTA_DEV", "1")
    (tmp_path / "c.toml").write_text("[datasets.x]\ndescription = 'no path'\n")
    assert cli.main(["--catalog", str(tmp_path / "c.toml")]) == 2
    assert "path" in capsys.readouterr().err


def test_two_processes_share_secret_and_metrics(catalog: Path, redis_url: str, consumer, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUANTA_", "PROMETHEUS_"))}
    env |= {"QUANTA_REDIS_URL": redis_url, "QUANTA_DEV": "1", "QUANTA_RATE_LIMIT": "0"}
    log = (tmp_path / "gateway.log").open("w+")
    command = [sys.executable, "-m", "quanta.gateway.cli", "--port", str(port), "--workers", "2",
               "--catalog", str(catalog)]  # fmt: skip
    process = subprocess.Popen(command, env=env, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "gateway did not start"
            time.sleep(0.05)
        consumer(paging_handler(pages=20))
        # A fresh connection per request, so both processes take some; any one verifies the other's tokens.
        page = httpx.post(f"{url}/v1/datasets/watdiv/query", json={"query": "SELECT * {?s ?p ?o}"}).json()
        count = 1
        while page["next"]:
            page = httpx.post(f"{url}/v1/datasets/watdiv/query", json={"next": page["next"]}).json()
            count += 1
        for _ in range(30):
            httpx.get(f"{url}/healthz")
        scrape = httpx.get(f"{url}/metrics").text
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert count == 20
    totals = {
        (s.name, s.labels.get("route")): s.value
        for family in text_string_to_metric_families(scrape)
        for s in family.samples
        if s.name == "quanta_http_requests_total"
    }
    # Every request counted once, whichever process answered it and whichever answers the scrape.
    assert totals[("quanta_http_requests_total", "/v1/datasets/{name}/query")] == 20
    assert totals[("quanta_http_requests_total", "/healthz")] >= 30
    log.seek(0)
    lines = [json.loads(line) for line in log if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "quanta.gateway.access"]
    assert len({line["pid"] for line in access}) == 2, "one process took every connection"
    assert all(line["request_id"] and line["status"] for line in access)
    assert all(line["task_id"] for line in access if line["route"] == "/v1/datasets/{name}/query")
    assert any("random key" in line["msg"] for line in lines)  # QUANTA_DEV warns
