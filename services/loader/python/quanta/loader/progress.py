"""The terminal progress line (bytes read with ETA, triples, rate), redrawn in place on stderr.

No dependency: one line, rewritten at most ten times a second."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from quanta.loader.build import Problem
from quanta.loader.memory import format_size

PHASES = {
    "parse": "reading",
    "dictionary": "building dictionary",
    "write": "writing HDT",
    "index": "building index",
}


class ProgressBar:
    """Listener that draws on a terminal."""

    def __init__(self, stream: TextIO | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        self.min_interval = min_interval
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.triples = 0
        self.drawn = False

    def progress(self, phase: str, bytes_read: int, bytes_total: int, triples: int) -> None:
        if triples >= 0:
            self.triples = triples
        now = time.monotonic()
        if phase == "parse" and now - self.last_draw < self.min_interval:
            return
        self.last_draw = now
        elapsed = max(now - self.started, 1e-9)
        rate = self.triples / elapsed
        if phase == "parse":
            fraction = bytes_read / bytes_total if bytes_total else 1.0
            eta = elapsed * (1 - fraction) / fraction if fraction > 0 else None
            width = 24
            filled = int(width * fraction)
            bar = "#" * filled + "." * (width - filled)
            text = (
                f"{fraction:4.0%} [{bar}] {format_size(bytes_read)}/{format_size(bytes_total)}"
                f"  ETA {_clock(eta)}  {self.triples:,} triples  {rate / 1000:,.0f}k triples/s"
            )
        else:
            text = f"{PHASES.get(phase, phase)}...  {self.triples:,} triples  {_clock(elapsed)} elapsed"
        self._draw(text)

    def skipped(self, problem: Problem) -> None:
        self.clear()
        print(f"quanta load: skipped {problem}", file=self.stream, flush=True)

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    def _draw(self, text: str) -> None:
        columns = shutil.get_terminal_size((100, 20)).columns
        self.stream.write("\r\x1b[K" + text[: columns - 1])
        self.stream.flush()
        self.drawn = True


class SkipReporter:
    """Listener for a non-terminal stderr: no progress, one line per skipped statement."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def progress(self, phase: str, bytes_read: int, bytes_total: int, triples: int) -> None:
        pass

    def skipped(self, problem: Problem) -> None:
        print(f"quanta load: skipped {problem}", file=self.stream, flush=True)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
