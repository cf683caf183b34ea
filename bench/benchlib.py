"""Shared by the benchmark scripts: the machine they ran on, and the marked
block of docs/benchmarks.md each of them owns."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any

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
