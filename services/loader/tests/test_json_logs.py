"""`quanta load` logs JSON lines on stderr only when asked (`--log-format json`, or
QUANTA_LOG_FORMAT=json as the chart's loader Job sets): in a pipeline a person still reads
`quanta load: ...` lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DUMP = '<http://a> <http://b> "c" .\nnot a triple\n<http://a> <http://b> "d" .\n'


def loader(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "quanta.loader.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def test_skips_and_failures_are_json_lines_when_asked(tmp_path: Path) -> None:
    dump = tmp_path / "d.nt"
    dump.write_text(DUMP)
    skipped = loader(str(dump), "-o", str(tmp_path / "s.hdt"), "--on-error", "skip", "--log-format", "json")
    assert skipped.returncode == 0, skipped.stderr
    (record,) = [json.loads(line) for line in skipped.stderr.splitlines()]
    assert (record["level"], record["msg"], record["problem"]["line"]) == (
        "warning",
        "skipped a malformed statement",
        2,
    )
    failed = loader(str(dump), "-o", str(tmp_path / "f.hdt"), env={"QUANTA_LOG_FORMAT": "json"})
    assert failed.returncode == 1
    (record,) = [json.loads(line) for line in failed.stderr.splitlines()]
    assert (record["level"], record["exit_status"]) == ("error", 1) and ":2:1:" in record["error"]


def test_in_a_pipeline_stderr_is_text_for_a_person(tmp_path: Path) -> None:
    dump = tmp_path / "d.nt"
    dump.write_text(DUMP)
    skipped = loader(str(dump), "-o", str(tmp_path / "s.hdt"), "--on-error", "skip", env={"QUANTA_LOG_FORMAT": ""})
    assert skipped.returncode == 0, skipped.stderr
    (line,) = skipped.stderr.splitlines()
    assert line.startswith(f"quanta load: skipped {dump}:2:1: ")
    assert json.loads(skipped.stdout)["skipped"] == 1  # the summary is still JSON on stdout
    failed = loader(str(dump), "-o", str(tmp_path / "f.hdt"), env={"QUANTA_LOG_FORMAT": ""})
    assert failed.returncode == 1 and failed.stderr.startswith(f"quanta load: error: {dump}:2:1:")
