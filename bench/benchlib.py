"""Shared by the benchmark scripts: each owns one marked block of docs/benchmarks.md."""

from __future__ import annotations

import re
from pathlib import Path


def replace_block(doc: Path, name: str, body: str) -> None:
    """Replace what sits between `<!-- name:begin -->` and `<!-- name:end -->`."""
    text = doc.read_text()
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text:
        text = text.rstrip() + f"\n\n## {name.capitalize()}\n\n{begin}\n{end}\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
    doc.write_text(pattern.sub(lambda _: f"{begin}\n{body.strip()}\n{end}", text))
