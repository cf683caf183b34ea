"""Peak memory of a load, predicted before the load starts.

The model, fitted on measured peaks (bench/loader.py; table in docs/benchmarks.md):

    peak = BASE + PER_TRIPLE * triples + PER_TERM * distinct terms + PER_TERM_BYTE * distinct term bytes

What the converter holds at its peak: every distinct term's text once (the `hdt` crate's interner,
then the compressed dictionary built from it) with its ids and maps, and per triple its 12-byte id
triple, the 16-byte fingerprint the verification counts, then the sorted HDT id triples and
bitmaps. BASE is the fixed part (block and batch buffers, thread stacks, the Python driver).
The index build that follows (quanta.native) needs much less: about 8 bytes per triple and per
(subject, predicate) pair for its work arrays, plus the index itself (4 to 5 bytes a triple).

The counts are not known before parsing, so they come in two steps:

1. a bound from the input size alone, assuming the costliest data per byte (short lines, every
   term distinct): BOUND_PER_BYTE. Most loads fit under their budget even so, and start at once.
2. when that bound exceeds the budget, the converter samples the first SAMPLE_BYTES of each
   input (triples, distinct terms and their bytes there), and the counts are extrapolated
   linearly to the whole size. Vocabularies grow more slowly than the data (the first 32 MiB of
   watdiv-10m has 0.36 distinct terms per triple, the whole file 0.10), so this over-estimates
   typical dumps (WatDiv by about 2x); a dump whose later part is far more varied than its start can
   still exceed it (BSBM at 100,000 products: 5.0 GiB predicted, 5.5 used, its long reviews coming
   after its products; at 284,000, 17.8 predicted and 15.0 used), and then the load is stopped
   while running when its memory reaches the budget.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from quanta.loader.inputs import Source

MIB = 1 << 20

# Fitted on watdiv-1m, watdiv-10m, 1M all-distinct long literals and 1M all-distinct short terms
# (R0 33 MB, 44.8 B/triple, 26.7 B/term, 2.13 B/term byte), rounded up for run-to-run variation.
BASE = 80 * MIB
PER_TRIPLE = 48.0
PER_TERM = 30.0
PER_TERM_BYTE = 2.3
# Worst case per input byte: a 20-byte N-Triples line with three distinct terms; a Turtle object
# list adds a triple and a term every ~5 bytes.
BOUND_PER_BYTE = {"nt": 9.5, "nq": 9.5, "ttl": 20.0}
SAMPLE_BYTES = 32 * MIB

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class Estimate:
    peak_bytes: int
    method: str  # "bound" (size only) or "sample" (extrapolated from the first SAMPLE_BYTES)
    triples: int | None = None
    distinct_terms: int | None = None
    distinct_term_bytes: int | None = None

    def describe(self) -> str:
        if self.method == "bound":
            return "the bound from the input size alone"
        return (
            f"extrapolated from the first {format_size(SAMPLE_BYTES)} of each input: about {self.triples:,} "
            f"triples, {self.distinct_terms:,} distinct terms of {format_size(self.distinct_term_bytes or 0)}"
        )


def parse_size(text: str) -> int:
    """'4G', '512M', '1.5GiB', '2000000000' -> bytes (binary units: the kernel's)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 512M, 4G, 1.5GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def model(triples: float, distinct_terms: float, distinct_term_bytes: float) -> int:
    return int(BASE + PER_TRIPLE * triples + PER_TERM * distinct_terms + PER_TERM_BYTE * distinct_term_bytes)


def bound(sources: Iterable[Source]) -> int:
    """Upper bound from the sizes alone (the costliest data per byte)."""
    return int(BASE + sum(BOUND_PER_BYTE[s.format] * s.uncompressed_bytes for s in sources))


def sampled(sources: Sequence[Source], converter: str) -> Estimate:
    """The model on counts extrapolated from the start of each input (one converter run)."""
    cmd = [converter, "--sample", str(SAMPLE_BYTES)]
    for s in sources:
        cmd += ["--input", s.format, "gz" if s.gzip else "plain", s.path.absolute().as_uri(), str(s.path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    samples = [json.loads(line) for line in done.stdout.splitlines() if '"sample"' in line]
    if done.returncode != 0 or len(samples) != len(sources):
        raise RuntimeError(f"sampling failed: {done.stderr.strip() or done.stdout.strip()}")
    triples = terms = term_bytes = 0.0
    for source, sample in zip(sources, samples, strict=True):
        scale = 1.0 if sample["complete"] else source.uncompressed_bytes / max(1, sample["bytes"])
        triples += sample["triples"] * scale
        terms += sample["distinct_terms"] * scale
        term_bytes += sample["distinct_term_bytes"] * scale
    return Estimate(model(triples, terms, term_bytes), "sample", int(triples), int(terms), int(term_bytes))


def estimate(sources: Sequence[Source], budget: int | None, converter: str) -> Estimate:
    """The size bound when it fits the budget (no extra pass), else the sampled estimate."""
    upper = bound(sources)
    if budget is None or upper <= budget:
        return Estimate(upper, "bound")
    return sampled(sources, converter)


def available() -> int | None:
    """MemAvailable: the default budget when --max-memory is not given."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss(pid: int) -> int:
    """Current resident set of a process, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def own_peak() -> int:
    """This process's peak resident set (VmHWM: unlike ru_maxrss, not inherited from the parent at exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
