"""`quanta load INPUT... -o OUT.hdt`: RDF dumps into the indexed HDT the workers serve.

Exit status: 0 loaded; 1 malformed input (with --on-error abort) or a failed conversion or
verification; 2 usage or an unreadable input; 3 the input does not fit the memory budget;
130 interrupted. Nothing is left at OUT.hdt unless the status is 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any

from quanta.common.logs import setup_json_logging
from quanta.loader import memory
from quanta.loader.build import LoadError, Options, Problem, load
from quanta.loader.progress import ProgressBar, SkipReporter

log = logging.getLogger("quanta.loader")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Turn RDF dumps (N-Triples .nt, N-Quads .nq, Turtle .ttl; plain or gzip) into one HDT file, "
        "its side index (.hdt.quanta-index.v1) and a metadata file (.hdt.meta.json). "
        "N-Quads: triples in named graphs are merged into the default graph. "
        "With several inputs, blank nodes are kept apart per input file."
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="RDF files; several are merged into one dataset")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.hdt", help="the HDT file to write")
    parser.add_argument(
        "--base-uri",
        metavar="URI",
        help="base IRI for relative IRIs in Turtle, also the dataset IRI in the HDT header "
        "(default: each input's file: URI, and the output's for the header)",
    )
    parser.add_argument(
        "--on-error",
        choices=("abort", "skip"),
        default="abort",
        help="abort (default): the first malformed statement stops the load, nothing is written; "
        "skip: malformed statements are left out, each one reported and counted",
    )
    parser.add_argument(
        "--max-memory",
        metavar="SIZE",
        type=_size,
        help="refuse, before reading, inputs predicted to need more memory than this (e.g. 2G, 512M); "
        "also stops a load that exceeds it (default: the available memory)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("QUANTA_LOG_FORMAT") or "text",
        help="text (default): a progress line on a terminal, `quanta load: ...` lines otherwise; "
        "json: skipped statements and errors as JSON lines on stderr, for a log collector "
        "(default from QUANTA_LOG_FORMAT; the chart's loader Job sets json)",
    )


def _size(text: str) -> int:
    try:
        return memory.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


class Interrupted(BaseException):
    """SIGTERM, turned into an exception so that the temporary files are removed."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Interrupted


class JsonSkipReporter(SkipReporter):
    """`--log-format json` (a Kubernetes Job): each skipped statement is one JSON log record."""

    def skipped(self, problem: Problem) -> None:
        log.warning("skipped a malformed statement", extra={"problem": problem.__dict__})


def run(args: argparse.Namespace) -> int:
    """Text for a person (a progress line on a terminal; in a pipeline, plain `quanta load:` lines
    a person reads in a file), JSON lines for a log collector only when asked (`--log-format json`)."""
    as_json = args.log_format == "json"
    listener: ProgressBar | SkipReporter
    if as_json:
        setup_json_logging()  # as every role logs
        listener = JsonSkipReporter()
    elif sys.stderr.isatty():
        listener = ProgressBar()
    else:
        listener = SkipReporter()
    options = Options(output=args.output, base_uri=args.base_uri, on_error=args.on_error, max_memory=args.max_memory)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        summary = load(args.inputs, options, listener)
    except LoadError as e:
        _clear(listener)
        if as_json:
            log.error("load failed", extra={"error": str(e), "exit_status": e.exit_code})
        else:
            print(f"quanta load: error: {e}", file=sys.stderr)
        if not sys.stdout.isatty():
            problem = e.problem.__dict__ if e.problem else None
            print(json.dumps({"error": {"message": str(e), "statement": problem, "exit_status": e.exit_code}}))
        return e.exit_code
    except (KeyboardInterrupt, Interrupted):
        _clear(listener)
        if as_json:
            log.error("interrupted; no output written")
        else:
            print("quanta load: interrupted; no output written", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    _clear(listener)
    if sys.stdout.isatty():
        _print_human(summary)
    else:
        print(json.dumps(summary))
    return 0


def _clear(listener: object) -> None:
    if isinstance(listener, ProgressBar):
        listener.clear()


def _print_human(s: dict[str, Any]) -> None:
    skipped = f", {s['skipped']:,} statements skipped" if s["skipped"] else ""
    print(
        f"{s['output']}: {s['distinct_triples']:,} triples ({s['triples_read']:,} read{skipped}) "
        f"in {s['seconds']:.1f} s, {s['triples_per_second']:,} triples/s; "
        f"HDT + index {memory.format_size(s['bytes_out'])} ({s['bytes_per_triple']} bytes/triple); "
        f"peak memory {memory.format_size(s['peak_memory_bytes'])}; version {s['version_id'][:16]}"
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m quanta.loader.cli`: the same command without the `quanta` entry point (the loader image)."""
    parser = argparse.ArgumentParser(prog="quanta load")
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
