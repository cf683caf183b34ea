"""JSON logs: one object per line, a traceback inside its record, uncaught exceptions included."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import logging
from quanta.common.logs import setup_json_logging
setup_json_logging("INFO")
log = logging.getLogger("quanta.test")
log.info("hello", extra={"worker": "w1"})
try:
    1 / 0
except ZeroDivisionError:
    log.exception("it failed")
raise RuntimeError("not caught")
"""


def test_every_line_is_one_json_object_with_tracebacks_inside() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # fails on any line that is not JSON
    assert [r["msg"] for r in records] == ["hello", "it failed", "uncaught exception"]
    assert records[0]["worker"] == "w1" and records[0]["level"] == "info" and records[0]["logger"] == "quanta.test"
    assert "ZeroDivisionError" in records[1]["exc"] and "Traceback" in records[1]["exc"]
    assert records[2]["level"] == "critical" and "RuntimeError: not caught" in records[2]["exc"]
