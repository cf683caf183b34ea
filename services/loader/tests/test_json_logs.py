"""Not on a terminal (a Kubernetes Job), `quanta load` logs one JSON object per line on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_skips_and_failures_are_json_lines(tmp_path: Path) -> None:
    dump = tmp_path / "d.nt"
    dump.write_text('<http://a> <http://b> "c" .\nnot a triple\n<http://a> <http://b> "d" .\n')
    command = [sys.executable, "-m", "quanta.loader.cli", str(dump)]
    skipped = subprocess.run([*command, "-o", str(tmp_path / "s.hdt"), "--on-error", "skip"], capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert skipped.returncode == 0, skipped.stderr
    (record,) = [json.loads(line) for line in skipped.stderr.splitlines()]
    assert (record["level"], record["msg"], record["problem"]["line"]) == (
        "warning",
        "skipped a malformed statement",
        2,
    )
    failed = subprocess.run([*command, "-o", str(tmp_path / "f.hdt")], capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    (record,) = [json.loads(line) for line in failed.stderr.splitlines()]
    assert (record["level"], record["exit_status"]) == ("error", 1) and ":2:1:" in record["error"]
