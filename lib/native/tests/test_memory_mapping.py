"""The HDT file and its index are memory-mapped and shared: a second worker
process on the same file adds little private memory (target: at most 10% of
the file), and the pages it reads are shared with the first one."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quanta.engine.storage.native import ensure_index

# Opens the store, reads every page of the file and the index (a full scan,
# every predicate, every object's list), and reports its own memory before
# and after, and how the mappings' pages are accounted.
WORKER = r"""
import json, sys
def rollup():
    out = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out
def mapping(paths):
    totals, current = {}, None
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5:
            current = parts[5] if len(parts) > 5 else None
        elif current in paths and len(parts) == 3 and parts[2] == "kB":
            totals[parts[0].rstrip(":")] = totals.get(parts[0].rstrip(":"), 0) + int(parts[1]) * 1024
    return totals
from quanta.engine.storage.native import NativeStore, index_path
path = sys.argv[1]
n = 0
for _ in range(3):  # warm the interpreter's own allocations first
    n += sum(1 for _ in range(100000))
before = rollup()
store = NativeStore(path, name="m")
n = sum(1 for _ in store.search(0, 0, 0))
for pid in range(1, 200):
    n += sum(1 for _ in store.search(0, store.nb_terms + pid, 0))
for o in range(1, store.nb_terms + 1, 7):
    n += sum(1 for _ in store.search(0, 0, o))
after = rollup()
print(json.dumps({"before": before, "after": after, "mapping": mapping({path, index_path(path)}), "read": n}))
sys.stdout.flush()
if len(sys.argv) > 2:
    sys.stdin.readline()  # hold the mapping until the second process has measured
"""


def measure(path: Path, hold: bool) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    args = [sys.executable, "-c", WORKER, str(path)] + (["hold"] if hold else [])
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def private(rollup: dict[str, int]) -> int:
    return rollup["Private_Clean"] + rollup["Private_Dirty"]


@pytest.mark.parametrize("name", ["watdiv-1m"])
def test_second_worker_shares_the_file(copied: Callable[[str], Path], name: str) -> None:
    path = copied(name)
    ensure_index(str(path))
    size = path.stat().st_size
    first, _ = measure(path, hold=True)
    try:
        second, report = measure(path, hold=False)
        second.wait(timeout=60)
    finally:
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.close()
        first.wait(timeout=60)
    grown = private(report["after"]) - private(report["before"])
    mapped = report["mapping"]
    assert mapped["Private_Dirty"] == 0  # nothing written into the mapping
    assert mapped["Shared_Clean"] > size // 2  # the pages are the first process's too
    assert grown <= size // 10, f"private memory grew by {grown} B for a {size} B file"
