"""Fair use that holds (issue 17, findings 7, 8 and 11), against a real service: one client's
replay loop cannot fill the queue for the others, invented API keys do not multiply a client's
quota, replaying a by-reference token does not multiply its plan in Redis, and a Redis at its
maxmemory answers 503 + Retry-After while the workers keep running.

Clients are told apart by address: the service trusts X-Forwarded-For, so each test client sends
its own (the bystander's is 203.0.113.7)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx
import pytest
import redis

from .conftest import SMALL_QUERY, Service, bystander

TRUSTED_KEY = "e2e-authenticated-key"
SERVICE_OPTIONS = {
    # pages of 50 rows: a replay costs the workers a quantum, not megabytes of pages for the gateway
    # and the test to copy (the machine's cores are shared by the service, the attacker and the bystander)
    "max_results": 50,
    "QUANTA_TRUST_FORWARDED": "1",
    "QUANTA_MAX_QUEUE": "20",
    "QUANTA_MAX_CLIENT_TASKS": "4",
    "QUANTA_API_KEY_HASHES": hashlib.sha256(TRUSTED_KEY.encode()).hexdigest(),
}
LONG = "SELECT * WHERE { ?s ?p ?o }"  # 100K rows: hundreds of quanta of 2 ms
QUERY_PATH = "/v1/datasets/watdiv/query"


def address(ip: str) -> dict[str, str]:
    return {"X-Forwarded-For": ip}


def first_token(http: httpx.Client, ip: str, plan: str = "auto") -> str:
    r = http.post(QUERY_PATH, json={"query": LONG, "plan": plan}, headers=address(ip))
    assert r.status_code == 200, r.text
    token: str = r.json()["next"]
    assert token
    return token


REPLAYER = """
import json, sys, threading, time
from collections import Counter
import httpx
url, token, ip, seconds, threads = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
seen, lock, stop = Counter(), threading.Lock(), time.monotonic() + seconds

def loop():
    with httpx.Client(base_url=url, timeout=30, headers={"X-Forwarded-For": ip}) as http:
        while time.monotonic() < stop:
            r = http.post("/v1/datasets/watdiv/query", json={"next": token})
            slug = r.json().get("type", "").rsplit("/", 1)[-1] if r.status_code != 200 else ""
            with lock:
                seen[f"{r.status_code} {slug}".strip()] += 1

workers = [threading.Thread(target=loop) for _ in range(threads)]
for t in workers:
    t.start()
for t in workers:
    t.join()
print(json.dumps(seen))
"""


def replay(url: str, token: str, ip: str, seconds: float, threads: int) -> Counter[str]:
    """`threads` loops sending the same `next` token for `seconds`; the statuses (and slugs) they saw.
    In a process of its own, so that its threads do not hold the bystander's interpreter lock."""
    args = [url, token, ip, str(seconds), str(threads)]
    done = subprocess.run([sys.executable, "-c", REPLAYER, *args], capture_output=True, text=True, timeout=seconds + 60)
    assert done.returncode == 0, done.stderr
    return Counter(json.loads(done.stdout))


def test_a_replay_loop_cannot_fill_the_queue_for_others(module_service: Service) -> None:
    """40 loops replaying one token from one address: the replayer gets 429 too-many-tasks, another
    address's small queries (/sparql and /v1) never fail and never wait a second, and a third
    address's long /sparql answer streams to its end."""
    url = module_service.url
    with httpx.Client(base_url=url, timeout=30) as http:
        token = first_token(http, "198.51.100.66")
        warm = http.post("/sparql", data={"query": SMALL_QUERY}, headers=address("203.0.113.7"))  # a first query
        assert warm.status_code == 200  # pays the gateway's one-time costs (imports, caches) before the clock runs
    other_v1: Counter[int] = Counter()
    long_rows: list[int] = []

    def v1_bystander() -> None:
        with httpx.Client(base_url=url, timeout=30, headers=address("203.0.113.8")) as http:
            stop = time.monotonic() + 4
            while time.monotonic() < stop:
                query = "SELECT ?s WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o } LIMIT 1"
                other_v1[http.post(QUERY_PATH, json={"query": query}).status_code] += 1
                time.sleep(0.1)

    def long_answer() -> None:
        with httpx.Client(base_url=url, timeout=60, headers=address("203.0.113.9")) as http:
            r = http.post("/sparql", data={"query": LONG + " LIMIT 20000"}, headers={"Accept": "text/csv"})
            long_rows.append(len(r.text.splitlines()) - 1 if r.status_code == 200 else -r.status_code)

    side = [threading.Thread(target=v1_bystander), threading.Thread(target=long_answer)]
    with bystander(url) as stalls:
        for t in side:
            t.start()
        seen = replay(url, token, "198.51.100.66", seconds=4, threads=40)
        for t in side:
            t.join()
    print(f"replayer {dict(seen)}; /v1 bystander {dict(other_v1)}; worst /sparql stall {stalls.worst:.3f} s")
    assert seen["429 too-many-tasks"] > 0 and seen["200"] > 0, seen
    assert not [s for s in seen if s.startswith("5")], seen
    assert not stalls.failures, stalls.failures[:3]
    assert stalls.worst < 1.0, stalls.worst
    assert set(other_v1) == {200}, other_v1
    assert long_rows == [20000]
    # /sparql quanta count against their query's client, not one name shared by every query
    r = redis.Redis.from_url(module_service.redis.url)
    assert r.exists("quanta:queued:ip:203.0.113.9") and not r.exists("quanta:queued:sparql-endpoint")


def test_invented_keys_share_their_address_quota(module_service: Service) -> None:
    """30 long /sparql queries from one address, each with its own invented X-API-Key: only the
    per-address cap (4) is admitted; an authenticated key (QUANTA_API_KEY_HASHES) has its own."""
    url = module_service.url
    statuses: list[int] = []
    lock = threading.Lock()
    all_seen, release = threading.Barrier(31), threading.Event()

    def open_query(key: str) -> None:
        headers = {**address("198.51.100.77"), "X-API-Key": key, "Accept": "text/csv"}
        with (
            httpx.Client(base_url=url, timeout=30) as http,
            http.stream("POST", "/sparql", data={"query": LONG}, headers=headers) as r,
        ):
            with lock:
                statuses.append(r.status_code)
            all_seen.wait(timeout=30)
            release.wait(timeout=30)  # admitted queries stay open (their leases held) meanwhile

    threads = [threading.Thread(target=open_query, args=(f"invented-{i}",)) for i in range(30)]
    for t in threads:
        t.start()
    try:
        all_seen.wait(timeout=30)
        counts = Counter(statuses)
        print(f"30 invented keys from one address: {dict(counts)}")
        assert counts[200] == 4 and counts[429] == 26, counts
        with httpx.Client(base_url=url, timeout=30) as http:
            headers = {**address("198.51.100.77"), "X-API-Key": TRUSTED_KEY, "Accept": "text/csv"}
            r = http.post("/sparql", data={"query": LONG + " LIMIT 3"}, headers=headers)
            assert r.status_code == 200, r.text
    finally:
        release.set()
        for t in threads:
            t.join()


def plan_keys(r: redis.Redis) -> tuple[int, int]:
    """How many plans Redis keeps, and their bytes (MEMORY USAGE)."""
    found = list(r.scan_iter("quanta:plan:*", count=1000))
    return len(found), sum(int(r.memory_usage(k) or 0) for k in found)


def used_memory(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def test_replaying_a_reference_token_does_not_multiply_its_plan(module_service: Service) -> None:
    r = redis.Redis.from_url(module_service.redis.url)
    with httpx.Client(base_url=module_service.url, timeout=30) as http:
        token = first_token(http, "198.51.100.88", plan="reference")
    (keys_before, bytes_before), memory_before = plan_keys(r), used_memory(r)
    started = time.monotonic()
    seen = replay(module_service.url, token, "198.51.100.88", seconds=4, threads=4)
    elapsed = time.monotonic() - started
    (keys_after, bytes_after), grown = plan_keys(r), used_memory(r) - memory_before
    print(
        f"{seen['200']} replays in {elapsed:.1f} s: +{keys_after - keys_before} plan keys, "
        f"+{bytes_after - bytes_before} B of plans ({(bytes_after - bytes_before) * 60 / elapsed / 1e6:.2f} MB/min), "
        f"used_memory {grown:+} B"
    )
    assert seen["200"] >= 100, seen
    assert keys_after - keys_before <= 1 and bytes_after - bytes_before < 16 * 1024
    assert grown < 256 * 1024, grown  # about flat (the streams and reply lists come and go)


def test_redis_at_maxmemory_answers_503_and_workers_survive(module_service: Service) -> None:
    r = redis.Redis.from_url(module_service.redis.url)
    limit = int(str(r.config_get("maxmemory")["maxmemory"]))
    assert limit > 0 and r.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    with httpx.Client(base_url=module_service.url, timeout=30, headers=address("198.51.100.99")) as http:
        r.config_set("maxmemory", 1)  # every write refused from now on
        try:
            for path, kwargs in [
                (QUERY_PATH, {"json": {"query": LONG}}),
                ("/sparql", {"data": {"query": LONG + " LIMIT 3"}}),
            ]:
                answer = http.post(path, **kwargs)  # type: ignore[arg-type]
                assert answer.status_code == 503, answer.text
                assert answer.headers["retry-after"] == "1"
                assert answer.json()["type"].endswith("/queue-full")
            time.sleep(3)  # a few heartbeats refused: the workers must ride it out
            assert all(w.poll() is None for w in module_service.workers)
        finally:
            r.config_set("maxmemory", limit)
        deadline = time.monotonic() + 10
        while (answer := http.post(QUERY_PATH, json={"query": LONG + " LIMIT 3"})).status_code != 200:
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.2)


@pytest.mark.parametrize("plan", ["value", "reference"])
def test_a_replayed_token_gives_the_same_page(module_service: Service, plan: str) -> None:
    """Replays stay exact: a page ended by max_results (not by the clock) is the same every time."""
    with httpx.Client(base_url=module_service.url, timeout=30, headers=address("198.51.100.111")) as http:
        query = "SELECT * WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }"
        start = http.post(QUERY_PATH, json={"query": query, "plan": plan}).json()
        pages = [http.post(QUERY_PATH, json={"next": start["next"]}).json() for _ in range(3)]
        assert len({str(p["results"]) for p in pages}) == 1
        # Each page's own next token continues it, or is refused as replaced (410): never another page.
        follow = [http.post(QUERY_PATH, json={"next": p["next"]}) for p in pages]
        assert follow[-1].status_code == 200
        answered = {str(f.json()["results"]) for f in follow if f.status_code == 200}
        assert len(answered) == 1 and all(f.status_code in (200, 410) for f in follow)
