"""`quanta <command>`: one entry point; each role's module defines its own
arguments (`configure(parser)`) and runs (`run(args) -> exit code`)."""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, one-line help). Modules load lazily: `quanta query`
# never imports the web stack, `quanta gateway` never imports HDT.
# services/cli/tests/test_main.py checks what a fresh `quanta query` imports.
COMMANDS: dict[str, tuple[str, str]] = {
    "query": ("quanta.engine.cli", "run a query in-process, suspending and resuming every quantum"),
    "load": ("quanta.loader.cli", "turn RDF dumps into an indexed HDT file"),
    "worker": ("quanta.worker.cli", "take tasks from the Redis queue and run one quantum each"),
    "gateway": ("quanta.gateway.cli", "serve the HTTP API (FastAPI on uvicorn)"),
    "up": ("quanta.cli.up", "run Redis, the gateway and workers locally on one machine"),
    "client": ("quanta.client.cli", "run a query against a quanta service, following `next`"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="quanta", description="Preemptive SPARQL query service.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    # A named command's parser alone (the other five cost a fresh process about a millisecond);
    # all of them, to list them, when no command is named.
    for name, (module, help_text) in COMMANDS.items():
        if chosen is None or name == chosen:
            sub = commands.add_parser(name, help=help_text, description=help_text)
            if name == chosen:
                importlib.import_module(module).configure(sub)
    args = parser.parse_args(argv)
    return int(importlib.import_module(COMMANDS[args.command][0]).run(args))


if __name__ == "__main__":
    sys.exit(main())
