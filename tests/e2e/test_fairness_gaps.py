"""Fairness gaps left after issue 17, against a real service (real Redis, workers and gateway):

- one client address may hold at most QUANTA_MAX_CONNECTIONS_PER_ADDRESS connections of a gateway
  process (before, only the process's cap of 1,000: one host could take them all);
- an IPv6 client is its /64 for fair use (before, each /128 had its own quotas: a host holds a /64);
- a share of the queue (QUANTA_QUEUE_RESERVE) is kept for the later tasks of running /sparql
  queries, so that new work from many clients cannot fill it and cut long answers mid-stream.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import httpx
import redis

from .conftest import Service

LONG = "SELECT * WHERE { ?s ?p ?o }"  # 100K rows
HELD_HEAD = (
    b"POST /sparql HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    b"Content-Length: 100\r\n\r\n"
)  # a request whose body never comes: it runs (waiting for its body) until the body deadline


def address(service: Service) -> tuple[str, int]:
    host, port = service.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def connect(service: Service, source: str = "127.0.0.1", head: bytes = b"") -> socket.socket:
    sock = socket.socket()
    sock.settimeout(5)
    sock.bind((source, 0))  # all of 127/8 is this machine: another address, another client
    sock.connect(address(service))
    if head:
        sock.sendall(head)
    return sock


def closed(sock: socket.socket, within_s: float = 5.0) -> bool:
    """Whether the server closed the connection (EOF or reset) within `within_s`."""
    sock.settimeout(within_s)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_one_address_holds_at_most_its_share_of_connections(make_service: Callable[..., Service]) -> None:
    """4 connections per address: a fifth from the same address gets 503 too-many-connections while
    the four run requests, or takes the place of the longest-waiting one; another address is served."""
    service = make_service(
        workers=1, QUANTA_MAX_CONNECTIONS_PER_ADDRESS="4", QUANTA_SPARQL_QUERY_RATE="0", QUANTA_RATE_LIMIT="0"
    )
    busy = [connect(service, head=HELD_HEAD) for _ in range(4)]
    try:
        time.sleep(0.5)  # their heads are read: each runs a request
        with httpx.Client(base_url=service.url, timeout=10) as same:
            refused = same.get("/healthz")
        assert refused.status_code == 503, refused.text
        problem = refused.json()
        assert problem["type"].endswith("/too-many-connections") and problem["limit"] == 4, problem
        assert "client address" in problem["detail"] and refused.headers["retry-after"] == "1"
        other = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=service.url, timeout=10, transport=other) as http:
            assert http.get("/healthz").status_code == 200, "another address is another client"
    finally:
        for sock in busy:
            sock.close()
    # another address for the second part: the first part's connections may not be gone yet
    silent = []  # four connections that send nothing (yet), one after the other: the first waited longest
    for _ in range(4):
        silent.append(connect(service, "127.0.0.3"))
        time.sleep(0.05)
    try:
        time.sleep(0.2)
        third = httpx.HTTPTransport(local_address="127.0.0.3")
        with httpx.Client(base_url=service.url, timeout=10, transport=third) as same:
            assert same.get("/healthz").status_code == 200, "a newcomer takes the longest-waiting one's place"
        gone = [n for n, sock in enumerate(silent) if closed(sock, within_s=1.0)]
        assert gone == [0], f"the oldest silent connection made room, the others stay: closed {gone}"
    finally:
        for sock in silent:
            sock.close()


def test_ipv6_clients_are_counted_per_64(make_service: Callable[..., Service]) -> None:
    """Two /sparql queries running per client: a third from another address of the same /64 is
    refused (429 too-many-queries); one from another /64 and IPv4 neighbours are each their own."""
    service = make_service(
        QUANTA_TRUST_FORWARDED="1", QUANTA_SPARQL_MAX_QUERIES="2", QUANTA_SPARQL_QUERY_RATE="0", QUANTA_RATE_LIMIT="0"
    )

    def ask(http: httpx.Client, ip: str) -> httpx.Response:
        r = http.post("/sparql", data={"query": LONG + " LIMIT 3"}, headers={"X-Forwarded-For": ip})
        return r

    with ExitStack() as held, httpx.Client(base_url=service.url, timeout=30) as http:
        for ip in ("2001:db8:1:2::a", "2001:db8:1:2:ffff:ffff:ffff:fffe", "198.51.100.1", "198.51.100.1"):
            client = held.enter_context(httpx.Client(base_url=service.url, timeout=30))
            stream = held.enter_context(
                client.stream("POST", "/sparql", data={"query": LONG}, headers={"X-Forwarded-For": ip})
            )
            assert stream.status_code == 200  # its first results came: it runs, unread, holding its lease
        same_64 = ask(http, "2001:db8:1:2:1234::1")
        assert same_64.status_code == 429, same_64.text
        assert same_64.json()["type"].endswith("/too-many-queries")
        assert ask(http, "2001:db8:1:3::a").status_code == 200, "another /64 is another client"
        assert ask(http, "198.51.100.2").status_code == 200, "IPv4 stays per address"
        assert ask(http, "198.51.100.1").status_code == 429
        r = redis.Redis.from_url(service.redis.url)
        assert r.zcard("quanta:running:ip:2001:db8:1:2::/64") == 2


FLOODER = """
import json, sys, threading, time
from collections import Counter
import httpx
url, seconds, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
seen, lock, stop = Counter(), threading.Lock(), time.monotonic() + seconds

def loop(i):
    headers = {"X-Forwarded-For": f"198.51.100.{i + 1}"}
    with httpx.Client(base_url=url, timeout=30, headers=headers) as http:
        while time.monotonic() < stop:
            r = http.post("/v1/datasets/watdiv/query", json={"query": "SELECT * WHERE { ?s ?p ?o } LIMIT 1"})
            slug = r.json().get("type", "").rsplit("/", 1)[-1] if r.status_code != 200 else ""
            with lock:
                seen[f"{r.status_code} {slug}".strip()] += 1

workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
for t in workers:
    t.start()
for t in workers:
    t.join()
print(json.dumps(seen))
"""


def flood(url: str, seconds: float, threads: int) -> subprocess.Popen[str]:
    """`threads` clients (each its own address) sending new /v1 queries for `seconds`, in a process of its own."""
    args = [sys.executable, "-c", FLOODER, url, str(seconds), str(threads)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def progress(http: httpx.Client, query: str) -> list[tuple[str, dict[str, Any]]]:
    """A /sparql query's progress stream (text/event-stream): its events, in order."""
    events: list[tuple[str, dict[str, Any]]] = []
    with http.stream("POST", "/sparql", data={"query": query}, headers={"Accept": "text/event-stream"}) as r:
        if r.status_code != 200:
            return [("status", {"status": r.status_code})]
        name = ""
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: ") and name != "results":
                events.append((name, json.loads(line.removeprefix("data: "))))
    return events


def test_new_work_cannot_crowd_out_running_sparql_answers(make_service: Callable[..., Service]) -> None:
    """A queue of 20, 4 of them reserved: 40 clients sending new queries fill it to 16 and are told
    503 queue-full, and the later quanta of three long /sparql answers (100 quanta each, one task in
    the queue at a time) are never refused. Without the reserve the flood filled the queue to 20:
    their continuations were refused, each refusal cost a second (the smart client's retry after
    Retry-After), and ten in a row cut the answer mid-stream (issue 17, finding 7)."""
    service = make_service(
        max_results=100, QUANTA_TRUST_FORWARDED="1", QUANTA_MAX_QUEUE="20", QUANTA_QUEUE_RESERVE="0.2",
        QUANTA_MAX_CLIENT_TASKS="100", QUANTA_RATE_LIMIT="0", QUANTA_SPARQL_QUERY_RATE="0",
    )  # fmt: skip
    answers: list[list[tuple[str, dict[str, Any]]]] = []
    lock = threading.Lock()

    def long_answer(ip: str) -> None:
        with httpx.Client(base_url=service.url, timeout=60, headers={"X-Forwarded-For": ip}) as http:
            for _ in range(50):  # a new query waits for room like any new work (before any result: a clean 503)
                events = progress(http, LONG + " LIMIT 10000")
                if events != [("status", {"status": 503})]:
                    break
                time.sleep(0.1)
        with lock:
            answers.append(events)

    flooder = flood(service.url, seconds=8, threads=40)
    try:
        time.sleep(2)  # the flood fills the queue
        threads = [threading.Thread(target=long_answer, args=(f"203.0.113.{i + 20}",)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out, err = flooder.communicate(timeout=60)
    finally:
        if flooder.poll() is None:
            flooder.kill()
            flooder.wait()
    assert flooder.returncode == 0, err
    seen = Counter(json.loads(out))
    later = []  # each answer's quanta after its first page: what the reserve is for
    for events in answers:
        statuses = [data["status"] for name, data in events if name == "quantum"]
        assert events[-1][0] == "end", events[-3:]
        later.append(Counter(statuses[statuses.index("ok") + 1 :]))
    print(f"flood {dict(seen)}; the long answers' later quanta {[dict(c) for c in later]}")
    assert seen["503 queue-full"] > 0 and seen["200"] > 0, seen
    assert all(set(c) == {"ok"} and c["ok"] >= 99 for c in later), later
