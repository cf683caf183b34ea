"""Workers that stop making progress (issue 17, finding 1's workers' half, and finding 17's
temporary folder), against a real service: a query that runs one quantum past the workers' stall
limit is answered 422 (and its worker starts afresh, in place) while the other workers answer
everyone else; a worker stuck where nothing can interrupt it ends itself; a query that took two
workers down in turn is answered 422 instead of taking a third; and `quanta up` replaces a worker
that died or stopped answering, and cleans up after itself.

The stalls are made by a stall limit below what one quantum of an attack takes (the regular
expression that hung workers in the issue is being made linear): with a REGEX whose pattern has a
back-reference (which the native evaluator leaves to Python), the attack's FILTER is decided by
Python for every row (as `re` did: the watchdog's SIGALRM stops it); with `= <IRI>`, natively,
which holds the GIL without looking at signals (only the worker's stall recorder, another
process, ends it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from quanta.common.redis_server import free_port
from quanta.worker.stalls import STOP_SIGNAL

from .conftest import SAMPLE, SMALL_QUERY, Service, bystander

STALL_S = 2
# cross products that the FILTER empties: no page fills, one 60 s quantum would run far past STALL_S
PYTHON_STALL = r'SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(REGEX(STR(?r), "(z)\\1{40}")) }'
NATIVE_STALL = "SELECT ?a WHERE { ?a ?p ?o . ?b ?q ?r FILTER(?r = <http://example.org/never>) }"
# the bystander starts 10 queries a second: more than a client's default share
OPTIONS: dict[str, object] = {
    "quantum_ms": 60_000,
    "QUANTA_WORKER_STALL_S": str(STALL_S),
    "QUANTA_SPARQL_QUERY_RATE": "0",
}
QUERY_PATH = "/v1/datasets/watdiv/query"


def warm_up(url: str) -> None:
    """The first queries of a new service pay for imports and caches: not what is measured."""
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(4):
            assert http.post("/sparql", data={"query": SMALL_QUERY}).status_code == 200
            assert http.post(QUERY_PATH, json={"query": SMALL_QUERY}).status_code == 200


def exited(service: Service, count: int = 0, within: float = 0) -> list[subprocess.Popen[bytes]]:
    """The service's workers that have exited, once there are `count` (or `within` seconds passed)."""
    deadline = time.monotonic() + within
    while True:
        gone = [w for w in service.workers if w.poll() is not None]
        if len(gone) >= count or time.monotonic() >= deadline:
            return gone
        time.sleep(0.05)


def attack(url: str, route: str, query: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=60) as http:
        if route == "/v1":
            return http.post(QUERY_PATH, json={"query": query})
        return http.post("/sparql", data={"query": query}, headers={"Accept": "application/sparql-results+json"})


def attack_in_background(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):  # its answer is not this test's concern
        attack(url, "/v1", NATIVE_STALL)


@pytest.mark.parametrize("route", ["/v1", "/sparql"])
def test_a_quantum_past_the_stall_limit_is_answered_422_while_the_others_answer(make_service, route: str) -> None:
    service = make_service(workers=2, **OPTIONS)
    warm_up(service.url)
    with bystander(service.url) as seen:
        started = time.monotonic()
        answer = attack(service.url, route, PYTHON_STALL)
        took = time.monotonic() - started
    assert answer.status_code == 422, answer.text[:500]
    problem = answer.json()
    assert problem["type"].endswith("/stall-limit") and f"stall limit of {STALL_S} s" in problem["detail"], problem
    assert took < STALL_S + 5
    assert not exited(service, 1, within=5), "its worker answered, then restarted in place"
    assert not seen.failures, seen.failures[:3]
    assert seen.worst < 1.0, f"a small query waited {seen.worst:.2f} s"
    with httpx.Client(base_url=service.url, timeout=10) as http:  # both workers serve on
        for _ in range(4):
            assert http.post(QUERY_PATH, json={"query": SMALL_QUERY}).status_code == 200


def test_a_worker_stuck_in_native_code_ends_itself_while_another_answers(make_service) -> None:
    service = make_service(workers=2, **OPTIONS)
    warm_up(service.url)
    with bystander(service.url) as seen:
        threading.Thread(target=attack_in_background, args=(service.url,), daemon=True).start()
        stuck = exited(service, 1, within=STALL_S + 15)
    assert len(stuck) == 1, "the worker that took the attack ended itself"
    assert stuck[0].returncode == -STOP_SIGNAL, "ended by its stall recorder: its stacks are on stderr"
    assert not seen.failures, seen.failures[:3]
    assert seen.worst < 1.0, f"a small query waited {seen.worst:.2f} s"


@pytest.mark.parametrize("route", ["/v1", "/sparql"])
def test_a_query_that_killed_two_workers_gets_a_422_and_kills_no_third(make_service, route: str) -> None:
    service = make_service(workers=3, **OPTIONS)
    warm_up(service.url)
    with bystander(service.url) as seen:
        started = time.monotonic()
        answer = attack(service.url, route, NATIVE_STALL)
        took = time.monotonic() - started
    assert answer.status_code == 422, answer.text[:500]
    problem = answer.json()
    assert problem["type"].endswith("/dead-letter")
    assert "2 workers" in problem["detail"] and f"stall limit of {STALL_S} s" in problem["detail"], problem
    assert took < 20, "answered well within the gateway's 30 s wait, not a 504"
    assert [w.returncode for w in exited(service)] == [-STOP_SIGNAL] * 2, "two workers were stuck, not the third"
    assert not seen.failures, seen.failures[:3]
    assert seen.worst < 1.0, f"a small query waited {seen.worst:.2f} s"
    with httpx.Client(base_url=service.url, timeout=10) as http:  # the survivor serves on
        assert http.post("/sparql", data={"query": SMALL_QUERY}).status_code == 200


def children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def workers_of(up: subprocess.Popen[str]) -> set[int]:
    found = set()
    for pid in children(up.pid):
        try:
            if b"\x00worker\x00" in Path(f"/proc/{pid}/cmdline").read_bytes():  # the command, not a flag
                found.add(pid)
        except FileNotFoundError:
            pass
    return found


def replaced(up: subprocess.Popen[str], gone: int, count: int, within: float) -> bool:
    """Whether `gone` has been reaped and `count` workers run again, within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        now = workers_of(up)
        if gone not in now and len(now) == count and not Path(f"/proc/{gone}").exists():
            return True
        time.sleep(0.2)
    return False


def test_up_replaces_a_stopped_and_a_killed_worker_and_leaves_no_temporary_folder(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    sample = tmp_path / "sample.hdt"
    sample.write_bytes(SAMPLE.read_bytes())
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "QUANTA_SECRET_KEYS"}
    # a heartbeat older than the stall limit + a Redis command + a blocking read + a beat: 5 s here
    env |= {"TMPDIR": str(temp), "QUANTA_WORKER_STALL_S": str(STALL_S), "QUANTA_REDIS_TIMEOUT_S": "1"}
    log = tmp_path / "up.log"
    with log.open("w") as stderr:
        up = subprocess.Popen(
            [sys.executable, "-m", "quanta.cli.main", "up", "--port", str(port), "--workers", "2",
             "--quantum-ms", "5", "--dataset", f"sample={sample}"],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
        )  # fmt: skip
    try:
        assert up.stdout is not None
        assert f"http://127.0.0.1:{port}" in up.stdout.readline()
        first, second = sorted(workers_of(up))

        os.kill(first, signal.SIGSTOP)  # alive, holding its connections, answering nothing
        assert replaced(up, first, 2, within=30), "the stopped worker was killed and replaced"
        assert "sent no heartbeat" in log.read_text()

        os.kill(second, signal.SIGKILL)
        assert replaced(up, second, 2, within=30), "the killed worker was replaced"

        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        answer = httpx.post(f"{url}/sparql", data={"query": SMALL_QUERY}, timeout=30)
        assert answer.status_code == 200, answer.text
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 0
    assert sorted(p.name for p in temp.iterdir()) == [], "`up` removed its folders (catalog, Redis's)"
