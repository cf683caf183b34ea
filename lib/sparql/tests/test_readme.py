"""The README's example runs and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"


def test_the_example_runs() -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(README), "exec"), {})
    assert out.getvalue().splitlines() == [
        "['MINUS']",
        "MINUS True",
        "?s\t?age",
        f'<http://example.org/a>\t"42"^^<{XSD_INTEGER}>',
    ]
