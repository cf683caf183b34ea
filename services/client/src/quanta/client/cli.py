"""`quanta client URL DATASET QUERY`: run a query to completion, streaming
results as pages arrive (TSV), or printing one JSON document at the end."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from quanta.client.client import QuantaClient, ServiceError, TransportError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="gateway URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("dataset", help="dataset name (see GET /v1/datasets)")
    parser.add_argument("query", help="query text, or @FILE.rq")
    parser.add_argument("--format", choices=["tsv", "json"], default="tsv", help="tsv streams; json prints at the end")
    parser.add_argument("--plan", choices=["value", "reference"], help="how the service returns saved plans")
    parser.add_argument("--api-key", help="sent as X-API-Key (rate limits are per key)")
    parser.add_argument("--stats", action="store_true", help="print per-page statistics on stderr")


def run(args: argparse.Namespace) -> int:
    text = Path(args.query[1:]).read_text() if args.query.startswith("@") else args.query
    out = sys.stdout
    bindings: list[dict[str, dict[str, str]]] = []
    head: list[str] | None = None
    boolean = None
    try:
        with QuantaClient(args.url, api_key=args.api_key) as client:
            for n, page in enumerate(client.pages(args.dataset, text, plan=args.plan), start=1):
                if args.stats:
                    print(f"page {n}: {len(page.bindings)} results {json.dumps(page.stats)}", file=sys.stderr)
                boolean = page.boolean
                if args.format == "json":
                    head = head or page.head
                    bindings += page.bindings
                    continue
                if head is None and page.head:
                    head = page.head
                    out.write("\t".join(f"?{v}" for v in head) + "\n")
                for b in page.bindings:
                    out.write("\t".join(_tsv(b.get(v)) for v in head or []) + "\n")
                out.flush()
    except ServiceError as e:
        print(f"quanta client: {e}", file=sys.stderr)
        return 1
    except TransportError as e:
        print(f"quanta client: cannot reach {args.url}: {e}", file=sys.stderr)
        return 1
    if args.format == "json":
        doc = (
            {"head": {}, "boolean": boolean}
            if boolean is not None
            else {"head": {"vars": head or []}, "results": {"bindings": bindings}}
        )
        out.write(json.dumps(doc) + "\n")
    elif boolean is not None:
        out.write(f"?_askResult\n{'true' if boolean else 'false'}\n")
    return 0


def _tsv(term: dict[str, str] | None) -> str:
    if term is None:
        return ""
    value = term["value"]
    if term["type"] == "uri":
        return f"<{value}>"
    if term["type"] == "bnode":
        return f"_:{value}"
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    if "xml:lang" in term:
        return f'"{escaped}"@{term["xml:lang"]}'
    if "datatype" in term:
        return f'"{escaped}"^^<{term["datatype"]}>'
    return f'"{escaped}"'
