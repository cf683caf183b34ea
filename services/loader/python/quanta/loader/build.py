"""One load: inputs -> OUT.hdt + OUT.hdt.quanta-index.v1 + OUT.hdt.meta.json, or nothing at all.

The HDT is written by `quanta-rdf2hdt` (Rust: oxttl parsers, the `hdt` crate's writer), which
streams JSON events on its stdout; this module runs it under a memory budget, builds the side
index the workers map (`quanta.native`, which reads the file back in place: an implementation
of its own, so reading back checks the writer), checks the counts, writes the metadata and only
then moves the files into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from quanta.loader import memory
from quanta.loader.inputs import InputError, Source

CONVERTER = "quanta-rdf2hdt"
CONVERTER_ENV = "QUANTA_RDF2HDT"
INSTALL_HINT = "make install (or: cargo install --locked --path services/loader)"
INDEX_SUFFIX = ".quanta-index.v1"  # the native store's side index, next to the HDT (quanta.native.INDEX_SUFFIX)
META_SUFFIX = ".meta.json"  # read by quanta.engine.storage.version.file_version
NAMED_GRAPHS = "merged into the default graph"
PROGRESS_MS = 200
MAX_SKIPPED_LISTED = 100


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    column: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return f"{where}: {self.reason}" if where else self.reason


class LoadError(Exception):
    """The load failed; nothing was left at the output path."""

    exit_code = 1

    def __init__(self, message: str, problem: Problem | None = None) -> None:
        super().__init__(message)
        self.problem = problem


class BadInput(LoadError):
    """An input that cannot be read at all (missing, unknown format): a usage error."""

    exit_code = 2


class MemoryRefused(LoadError):
    """The input will not fit in the memory budget (refused before parsing, or stopped while running)."""

    exit_code = 3


class Listener(Protocol):
    def progress(self, phase: str, bytes_read: int, bytes_total: int, triples: int) -> None: ...

    def skipped(self, problem: Problem) -> None: ...


class Silent:
    def progress(self, phase: str, bytes_read: int, bytes_total: int, triples: int) -> None:
        pass

    def skipped(self, problem: Problem) -> None:
        pass


@dataclass
class Options:
    output: str
    base_uri: str | None = None
    on_error: str = "abort"  # abort | skip
    max_memory: int | None = None  # None: MemAvailable
    threads: int | None = None


@dataclass
class _Run:
    """What the converter reported."""

    done: dict[str, Any] = field(default_factory=dict)
    skipped: list[Problem] = field(default_factory=list)
    skipped_by_file: dict[str, int] = field(default_factory=dict)
    peak_rss: int = 0  # the converter's
    driver_rss: int = 0  # this process's while the converter runs


def converter() -> str:
    """Path of the converter binary: $QUANTA_RDF2HDT, then beside this Python (`make install`
    builds it into the environment's bin/), then PATH."""
    candidates = [os.environ.get(CONVERTER_ENV), str(Path(sys.executable).parent / CONVERTER), shutil.which(CONVERTER)]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise LoadError(f"{CONVERTER} not found (set ${CONVERTER_ENV} or install it: {INSTALL_HINT})")


def load(inputs: list[str], options: Options, listener: Listener | None = None) -> dict[str, Any]:
    """Build the indexed HDT; returns the summary. Raises LoadError (nothing left behind)."""
    listener = listener or Silent()
    started = time.monotonic()
    try:
        sources = [Source.probe(name) for name in inputs]
    except InputError as e:
        raise BadInput(str(e)) from e
    budget = options.max_memory if options.max_memory is not None else memory.available()
    try:
        estimate = memory.estimate(sources, budget, converter())
    except RuntimeError as e:  # the sample could not be read: say so rather than guess
        raise LoadError(str(e)) from e
    if budget is not None and estimate.peak_bytes > budget:
        nt_bytes = sum(s.uncompressed_bytes for s in sources)
        source = "--max-memory" if options.max_memory is not None else "available memory (MemAvailable)"
        raise MemoryRefused(
            f"refusing to load: {len(sources)} input(s), {memory.format_size(nt_bytes)} uncompressed, need about "
            f"{memory.format_size(estimate.peak_bytes)} at peak, more than the {source} of "
            f"{memory.format_size(budget)} (estimate {estimate.describe()}; model in services/loader/README.md)"
        )

    out = Path(os.path.abspath(options.output))
    if not out.parent.is_dir():
        raise BadInput(f"{out.parent}: output directory does not exist")
    tmp = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp.hdt"
    tmp_index = Path(str(tmp) + INDEX_SUFFIX)
    tmp_meta = Path(str(tmp) + META_SUFFIX)
    dataset_iri = options.base_uri or out.as_uri()
    try:
        run = _convert(sources, tmp, dataset_iri, options, budget, estimate, listener)
        done = run.done
        listener.progress("index", sum(s.bytes for s in sources), sum(s.bytes for s in sources), done["triples_read"])
        index_started = time.monotonic()
        hdt_count = _build_index(tmp)
        index_seconds = time.monotonic() - index_started
        if not done["distinct_triples"] == done["hdt_triples"] == hdt_count:
            raise LoadError(
                f"verification failed: {done['distinct_triples']} distinct triples parsed, "
                f"the converter wrote {done['hdt_triples']}, the native reader reads {hdt_count}"
            )
        hdt_bytes = tmp.stat().st_size
        index_bytes = tmp_index.stat().st_size
        meta = {
            "version_id": done["hdt_sha256"][:32],
            "triples": hdt_count,
            "triples_read": done["triples_read"],
            "skipped": done["skipped"],
            "named_graph_triples": done["named_graph_triples"],
            "named_graphs": NAMED_GRAPHS,
            "sources": [
                {
                    "path": os.path.abspath(s.path),
                    "bytes": reported["bytes"],
                    "sha256": reported["sha256"],
                    "format": s.format,
                    "compression": "gzip" if s.gzip else "none",
                }
                for s, reported in zip(sources, done["sources"], strict=True)
            ],
            "built_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "seconds": round(time.monotonic() - started, 3),
            "tool": {**done["tool"], "index": f"quanta-native {_native_version()}"},
            "hdt_bytes": hdt_bytes,
            "hdt_sha256": done["hdt_sha256"],
            "index_bytes": index_bytes,
            "dataset_iri": dataset_iri,
            "base_uri": options.base_uri,
        }
        _write_synced(tmp_meta, json.dumps(meta, indent=2) + "\n")
        _fsync(tmp_index)
        _install(tmp, out)
    except BaseException:
        for p in (tmp, tmp_index, tmp_meta):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        raise

    seconds = time.monotonic() - started
    converter_peak = max(run.peak_rss, done.get("peak_rss_bytes", 0))
    peak = max(run.driver_rss + converter_peak, memory.own_peak())  # both processes, then the index build
    return {
        "output": str(out),
        "triples_read": done["triples_read"],
        "distinct_triples": hdt_count,
        "duplicates": done["triples_read"] - hdt_count,
        "skipped": done["skipped"],
        "skipped_by_file": run.skipped_by_file,
        "skipped_statements": [asdict(p) for p in run.skipped[:MAX_SKIPPED_LISTED]],
        "named_graph_triples": done["named_graph_triples"],
        "named_graphs": NAMED_GRAPHS,
        "seconds": round(seconds, 3),
        "triples_per_second": round(done["triples_read"] / seconds) if seconds else None,
        "bytes_in": sum(s.bytes for s in sources),
        "bytes_in_uncompressed": sum(s.uncompressed_bytes for s in sources),
        "bytes_out": hdt_bytes + index_bytes,
        "hdt_bytes": hdt_bytes,
        "index_bytes": index_bytes,
        "bytes_per_triple": round((hdt_bytes + index_bytes) / hdt_count, 3) if hdt_count else None,
        "peak_memory_bytes": peak,
        "estimated_peak_memory_bytes": estimate.peak_bytes,
        "memory_estimate": estimate.method,
        "converter_peak_memory_bytes": converter_peak,
        "phases": {
            "parse": done["parse_seconds"],
            "dictionary": done["build_seconds"],
            "write": done["write_seconds"],
            "index": round(index_seconds, 3),
        },
        "version_id": meta["version_id"],
        "metadata": str(out) + META_SUFFIX,
    }


def _convert(
    sources: list[Source],
    tmp: Path,
    dataset_iri: str,
    options: Options,
    budget: int | None,
    estimate: memory.Estimate,
    listener: Listener,
) -> _Run:
    """Runs the converter to write `tmp`; follows its events; enforces the memory budget."""
    cmd = [converter(), "--output", str(tmp), "--dataset-iri", dataset_iri, "--on-error", options.on_error]
    cmd += ["--progress-ms", str(PROGRESS_MS)]
    if options.threads:
        cmd += ["--threads", str(options.threads)]
    if len(sources) > 1:
        cmd.append("--scope-blank-nodes")
    for s in sources:
        base = options.base_uri or Path(os.path.abspath(s.path)).as_uri()
        cmd += ["--input", s.format, "gz" if s.gzip else "plain", base, str(s.path)]
    total = sum(s.bytes for s in sources)
    run = _Run(driver_rss=memory.rss(os.getpid()))
    error: Problem | None = None
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1)
        try:
            assert proc.stdout is not None
            phase = "parse"
            for line in proc.stdout:
                event = json.loads(line)
                kind = event["event"]
                if kind == "progress":
                    rss = memory.rss(proc.pid)
                    run.peak_rss = max(run.peak_rss, rss)
                    if budget is not None and rss + run.driver_rss > budget:
                        raise MemoryRefused(
                            f"stopped: the load's memory reached {memory.format_size(rss + run.driver_rss)}, over the "
                            f"budget of {memory.format_size(budget)}, although about "
                            f"{memory.format_size(estimate.peak_bytes)} was predicted ({estimate.describe()}): "
                            "this input's vocabulary grows faster than its start suggests; give more memory"
                        )
                    listener.progress(phase, event["bytes"], total, event["triples"])
                elif kind == "skipped":
                    problem = _problem(event)
                    if len(run.skipped) < MAX_SKIPPED_LISTED:
                        run.skipped.append(problem)
                    run.skipped_by_file[problem.file] = run.skipped_by_file.get(problem.file, 0) + 1
                    listener.skipped(problem)
                elif kind == "phase":
                    phase = event["name"]
                    listener.progress(phase, total, total, -1)
                elif kind == "error":
                    error = _problem(event)
                elif kind == "done":
                    run.done = event
            status = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if error is not None:
            raise LoadError(str(error), error)
        if status != 0 or not run.done:
            stderr.seek(0)
            detail = stderr.read().decode(errors="replace").strip()
            raise LoadError(f"{CONVERTER} failed (exit status {status}): {detail[-2000:] or 'no message'}")
    return run


def _problem(event: dict[str, Any]) -> Problem:
    return Problem(event["file"], event["line"], event["column"], event["reason"])


def _build_index(path: Path) -> int:
    """Builds `<path>.quanta-index.v1` and opens the HDT with it (the native reader parses the
    whole file's structure and checks the index against it); returns its triple count."""
    from quanta.native import INDEX_SUFFIX as NATIVE_SUFFIX
    from quanta.native import NativeHdt, build_index  # imported late: `quanta load --help` needs neither

    assert NATIVE_SUFFIX == INDEX_SUFFIX
    index = str(path) + INDEX_SUFFIX
    try:
        build_index(str(path), index)
        return int(NativeHdt(str(path), index).triples)
    except OSError as error:
        raise LoadError(f"the written HDT does not read back: {error}") from error


def _native_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("quanta-native")
    except PackageNotFoundError:
        return "unknown"


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _install(tmp: Path, out: Path) -> None:
    """Moves the three files into place, the HDT last: a reader that finds OUT.hdt finds its index
    and metadata beside it. An older OUT.hdt is removed first so that it is never paired with the
    new index (processes that have it open keep reading the old file)."""
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    os.replace(str(tmp) + INDEX_SUFFIX, str(out) + INDEX_SUFFIX)
    os.replace(str(tmp) + META_SUFFIX, str(out) + META_SUFFIX)
    os.replace(tmp, out)
    dir_fd = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
