"""`quanta up` runs the whole service, `quanta client` completes a query
through it, and SIGTERM stops everything `up` started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from quanta.common.redis_server import free_port
from quanta.engine.storage import open_store
from quanta.testkit.engine import run_paged
from quanta.testkit.gateway import follow

QUERY = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }"
COMMAND = [sys.executable, "-m", "quanta.cli.main"]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_up_serves_the_sample_and_stops_cleanly(tmp_path) -> None:
    sample = tmp_path / "watdiv-100k.hdt"
    sample.write_bytes(
        (__import__("pathlib").Path(__file__).resolve().parents[2] / "data/watdiv-100k.hdt").read_bytes()
    )
    port = free_port()
    up = subprocess.Popen(
        [
            *COMMAND,
            "up",
            "--port",
            str(port),
            "--workers",
            "2",
            "--gateways",
            "2",
            "--quantum-ms",
            "5",
            "--dataset",
            f"sample={sample}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "QUANTA_SECRET_KEYS"},
    )
    try:
        assert up.stdout is not None
        banner = up.stdout.readline()
        assert f"http://127.0.0.1:{port}" in banner, banner
        started = children(up.pid)
        workers = [p for p in started if b"\x00worker\x00" in cmdline(p)]
        assert len(workers) == 2, "each worker is its own process, named `worker`"
        (gateway,) = [p for p in started if b"\x00gateway\x00" in cmdline(p)]
        serving = [p for p in children(gateway) if b"spawn_main" in cmdline(p)]  # not the resource tracker
        assert len(serving) == 2, "two gateway processes share the port (uvicorn's workers)"
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200

        out = subprocess.run(
            [*COMMAND, "client", f"http://127.0.0.1:{port}", "sample", QUERY],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        _, expected, _, _ = run_paged(open_store(str(sample), name="watdiv-100k"), QUERY, None)
        assert lines[0] == "?s\t?o" and len(lines) == len(expected) + 1
        assert sorted(lines[1:]) == sorted(f"<{s}>\t<{o}>" for s, o in expected)

        # an operator (or a test) kills a worker: `up` starts another
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while len([p for p in children(up.pid) if p != workers[0]]) < len(started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(children(up.pid) - {workers[0]}) == len(started)
    finally:
        running = children(up.pid) | {p for c in children(up.pid) for p in children(c)}
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
    time.sleep(0.5)
    assert not [p for p in running if b"quanta" in cmdline(p)], "everything `up` started has stopped"


def test_client_reports_an_unreachable_service_in_one_line() -> None:
    out = subprocess.run(
        [*COMMAND, "client", f"http://127.0.0.1:{free_port()}", "x", "ASK {}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("quanta client: cannot reach") and out.stderr.count("\n") == 1


def test_up_with_the_queue_sharded_answers_as_with_one_redis(tmp_path) -> None:
    """Two Redis shards, a worker on each; pages of 100 rows and no first quantum in the gateway, so
    a query's many quanta go through both shards (by value), and a plan kept by reference resumes
    in its own."""
    sample = tmp_path / "watdiv-100k.hdt"
    sample.write_bytes((Path(__file__).resolve().parents[2] / "data/watdiv-100k.hdt").read_bytes())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "QUANTA_SECRET_KEYS"} | {"QUANTA_LOCAL_QUANTUM_MS": "0"}
    args = ["--port", str(port), "--workers", "2", "--shards", "2", "--max-results", "100"]
    args += ["--dataset", f"sample={sample}"]
    up = subprocess.Popen(
        [*COMMAND, "up", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert up.stdout is not None
        assert "over 2 Redis shards" in up.stdout.readline()
        ready = httpx.get(f"{url}/readyz").json()
        assert ready["shards"] == [{"redis": True, "workers": 1}, {"redis": True, "workers": 1}]
        _, expected, _, _ = run_paged(open_store(str(sample), name="watdiv-100k"), QUERY, None)
        rows = {(s, o) for s, o in expected}
        with httpx.Client(base_url=url, timeout=120) as client:
            answer = client.post(
                "/sparql", data={"query": QUERY}, headers={"accept": "application/sparql-results+json"}
            )
            assert answer.status_code == 200, answer.text
            bindings = answer.json()["results"]["bindings"]
            assert len(bindings) == len(expected) and {(b["s"]["value"], b["o"]["value"]) for b in bindings} == rows
            pages = follow(client, "sample", {"query": QUERY, "plan": "reference"})
        assert len(pages) > 2 and {p["stats"]["plan"] for p in pages[:-1]} == {"reference"}
        paged = [(b["s"]["value"], b["o"]["value"]) for p in pages for b in p["results"]["bindings"]]
        assert len(paged) == len(expected) and set(paged) == rows
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
