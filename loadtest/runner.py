"""One headless Locust run as the experiments make it (the real `locust` command, in a
process of its own), with what the machine did meanwhile: the load average and the
share of CPU time that was busy or stolen by the hypervisor, sampled every second.
The machine is shared, so every result carries the load it was measured under."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "bench"))  # after loadtest/: bench/ has a service.py too
import benchlib  # noqa: E402  (bench/: the machine, the docs' blocks)

LOCUST = [sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py")]


def machine() -> dict[str, Any]:
    found: dict[str, Any] = benchlib.machine({"locust": "locust", "gevent": "gevent"})
    return found


def replace_block(doc: Path, name: str, body: str) -> None:
    """The block between `<!-- name:begin -->` and `<!-- name:end -->` of `doc`."""
    benchlib.replace_block(doc, name, body)


def _cpu() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


class LoadSampler:
    """Samples /proc/loadavg and /proc/stat every second in a thread while a run goes on."""

    def __init__(self) -> None:
        self.load: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            self.load.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._cpu = _cpu()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        delta = [b - a for a, b in zip(self._cpu, _cpu(), strict=False)]
        total = sum(delta) or 1
        idle = delta[3] + delta[4]  # idle, iowait
        steal = delta[7] if len(delta) > 7 else 0
        self.summary = {
            "load1_mean": round(fmean(self.load), 2) if self.load else round(os.getloadavg()[0], 2),
            "load1_max": round(max(self.load), 2) if self.load else round(os.getloadavg()[0], 2),
            "cpu_busy_pct": round(100 * (total - idle - steal) / total, 1),
            "cpu_steal_pct": round(100 * steal / total, 1),
        }


@dataclass
class Run:
    """What one Locust run left: its queries (the query log), its counts, the load meanwhile."""

    label: str
    wall_s: float
    queries: list[dict[str, Any]]
    counts: dict[str, int]
    machine: dict[str, Any]
    locust_cpu_s: float
    returncode: int
    options: list[str] = field(default_factory=list)

    def measured(self) -> list[dict[str, Any]]:
        """The queries an experiment measures (not the loaders')."""
        return [q for q in self.queries if q["role"] != "loader"]


def locust(
    host: str,
    user: str,
    users: int,
    out: Path,
    label: str,
    *options: str,
    run_time: str = "30m",
    env: dict[str, str] | None = None,
) -> Run:
    """`locust --headless` with `users` users spawned at once, until they finish their passes
    (or `run_time`); CSV and the query log go to `out`/`label`*."""
    out.mkdir(parents=True, exist_ok=True)
    log, counts = out / f"{label}.queries.jsonl", out / f"{label}.counts.json"
    log.unlink(missing_ok=True)
    command = [*LOCUST, "--host", host, "--headless", "-u", str(users), "-r", str(users), "--run-time", run_time]
    command += ["--csv", str(out / label), "--only-summary", "--query-log", str(log), "--counts-out", str(counts)]
    command += ["--stop-timeout", "5", *options, user]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with LoadSampler() as sampler:
        done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (out / f"{label}.locust.log").write_text(done.stdout[-20000:] + done.stderr[-20000:])
    queries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return Run(
        label=label,
        wall_s=round(wall, 2),
        queries=queries,
        counts=json.loads(counts.read_text()) if counts.exists() else {},
        machine=sampler.summary,
        locust_cpu_s=round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2),
        returncode=done.returncode,
        options=[*options, user],
    )
