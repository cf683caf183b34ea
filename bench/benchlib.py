"""Shared by the benchmark scripts: the machine they ran on, the marked block of
docs/benchmarks.md each of them owns, percentiles, `quanta up` on this machine, a
bare load generator for the preemptive API, and one query run to its end by the smart
client (`run_client`)."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import http.client
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from quanta.common.redis_server import free_port, wait_ready

REPO = Path(__file__).resolve().parents[1]


def machine(packages: dict[str, str], tools: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """What a result depends on: CPU, memory, load, versions (`packages` maps a
    key to a distribution name; `tools` a key to a command printing a version)."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass

    def run(cmd: list[str], cwd: Path | None = None) -> str | None:
        try:
            return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "absent"

    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        **{key: version(dist) for key, dist in packages.items()},
        **{key: run(cmd) or "absent" for key, cmd in (tools or {}).items()},
        "git_commit": run(["git", "rev-parse", "HEAD"], REPO) or "",
        "git_dirty": bool(run(["git", "status", "--porcelain", "--untracked-files=no"], REPO)),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def replace_block(doc: Path, name: str, body: str) -> None:
    """Replace what sits between `<!-- name:begin -->` and `<!-- name:end -->`."""
    text = doc.read_text()
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text:
        text = text.rstrip() + f"\n\n## {name.capitalize()}\n\n{begin}\n{end}\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    doc.write_text(pattern.sub(lambda _: f"{begin}\n{body.strip()}\n{end}", text))


def run_whole(store: Any, query: str, runs: int) -> tuple[int, list[float], list[float]]:
    """`query` compiled and run to its end in this process at an infinite quantum, `runs`
    times, the garbage collector paused while it runs: (rows, wall seconds, CPU seconds)."""
    from quanta.engine.execute import run
    from quanta.engine.planning.compile import compile_query
    from quanta.engine.quantum import Quantum

    walls, cpus, rows = [], [], 0
    for _ in range(runs):
        plan = compile_query(query, store)
        plan.ctx.quantum = quantum = Quantum(None)
        gc.collect()
        gc.disable()
        wall, cpu = time.perf_counter(), time.process_time()
        got, done = run(plan, quantum)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        gc.enable()
        assert done
        rows = len(got)
    return rows, walls, cpus


def percentiles(values: list[float], digits: int = 3) -> dict[str, float]:
    """n, p50, p99, max and mean ({} for no values)."""
    if not values:
        return {}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], digits)

    n, top, mean = len(ordered), round(ordered[-1], digits), round(statistics.fmean(ordered), digits)
    return {"n": n, "p50": pick(0.5), "p99": pick(0.99), "max": top, "mean": mean}


def role_cpu_s(root: int) -> dict[str, float]:
    """CPU seconds used so far by the processes `quanta up` started, by role (from /proc): a
    process its command line does not name (a gateway's uvicorn workers) has its parent's role."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, ppid = int(stat.parent.name), int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(pid)
    cpu: dict[str, float] = {}
    todo = [(root, "up")]
    while todo:
        pid, inherited = todo.pop()
        try:
            command = (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")).decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = next((r for r in ("redis-server", "gateway", "worker") if r in command), inherited)
        todo += [(child, role) for child in children.get(pid, [])]
        cpu[role] = cpu.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return cpu


@contextmanager
def quanta_up(
    dataset: Path,
    *,
    workers: int,
    quantum_ms: float,
    max_results: int | None = None,
    env: Mapping[str, str] = {},
    checkout: Path | None = None,
) -> Iterator[tuple[str, int]]:
    """`quanta up` on this machine serving `dataset` as `watdiv`, the rate limit off: its URL and
    process id (the gateway, workers and Redis are its children). `checkout`: another checkout of
    quanta, installed (`make install`), whose service runs instead of this one."""
    port = free_port()
    python = str(checkout / ".venv" / "bin" / "python") if checkout else sys.executable
    command = [python, "-m", "quanta.cli.main", "up", "--port", str(port), "--workers", str(workers),
               "--quantum-ms", str(quantum_ms), "--dataset", f"watdiv={dataset}"]  # fmt: skip
    if max_results is not None:
        command += ["--max-results", str(max_results)]
    # its clients all share one address: no per-client share of the queue
    limits = {"QUANTA_RATE_LIMIT": "0", "QUANTA_MAX_CLIENT_TASKS": "1000000"}
    variables = {**os.environ, "QUANTA_REPLY_TIMEOUT_S": "600", **limits, **env}
    process = subprocess.Popen(
        command, cwd=checkout, env=variables, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_ready(url, process, timeout=300):
            raise RuntimeError("quanta up did not start")
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


class BareClient:
    """Runs queries over the preemptive API with http.client, reading only each page's `next`:
    a client that takes as little as possible from the cores the service runs on (0.4 ms of
    CPU a page, where QuantaClient, which decodes every page, takes 1 to 2 ms)."""

    def __init__(self, url: str, dataset: str = "watdiv", timeout_s: float = 600) -> None:
        address = urlsplit(url)
        assert address.hostname is not None, url
        self.path = f"/v1/datasets/{dataset}/query"
        self.connection = http.client.HTTPConnection(address.hostname, address.port, timeout=timeout_s)

    def run(self, query: str) -> int:
        """Run `query` to its end; how many pages it took."""
        body: dict[str, str] = {"query": query}
        pages = 0
        while True:
            self.connection.request("POST", self.path, json.dumps(body), {"Content-Type": "application/json"})
            response = self.connection.getresponse()
            data = response.read()
            if response.status != 200:
                raise RuntimeError(f"{response.status}: {data[:300]!r}")
            pages += 1
            # the page ends with "next": ..., "stats": {...}, and stats hold no "next"
            token = data[data.rindex(b'"next":') + 7 :].split(b",", 1)[0]
            if token == b"null":
                return pages
            body = {"next": token.strip(b'"').decode()}

    def close(self) -> None:
        self.connection.close()


# A batch of queries shared by client processes: each takes the next query until none is
# left. The pool's initializer hands every process the batch's shared counter.
_next_query: Any = None


def share_batch(counter: Any) -> None:
    """The pool initializer: `counter` is a multiprocessing.Value("i", 0)."""
    global _next_query
    _next_query = counter


def take_next() -> int:
    """The index of the batch's next query (past the end once it is done)."""
    with _next_query.get_lock():
        index: int = _next_query.value
        _next_query.value += 1
    return index


async def run_client(url: str, query: str, timeout_s: float, **options: Any) -> dict[str, Any]:
    """`query` run to its end by the smart client over `/v1` (`options`: SmartClient's): its
    requests (retries included), bytes of the page bodies, rows, a digest of the multiset of
    rows (a sum of their hashes, in any order), seconds and retried requests; over
    `timeout_s`, the requests and rows so far. A QueryError is the caller's."""
    from quanta.client import HttpTransport, RequestEvent, SmartClient

    events: list[RequestEvent] = []
    transport = HttpTransport(url, timeout=900)
    client = SmartClient(transport, on_request=events.append, **options)
    started = time.perf_counter()
    execution = await client.prepare(query, "watdiv")
    digest = rows = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for row in execution.solutions():
                digest = (digest + int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest())) % 2**64
                rows += 1
    except TimeoutError:
        await execution.aclose()
        return {"timeout_s": timeout_s, "requests": len(events), "rows": rows}
    finally:
        transport.close()
    return {
        "requests": len(events),
        "bytes": sum(e.bytes for e in events),
        "rows": rows,
        "digest": f"{digest:016x}",
        "seconds": round(time.perf_counter() - started, 3),
        "retried": sum(e.status != "ok" for e in events),
    }
