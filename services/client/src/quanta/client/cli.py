"""`quanta client URL DATASET QUERY`: run a query to completion, streaming
results as pages arrive (TSV), or printing one JSON document at the end."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from quanta.client.client import QuantaClient, ServiceError, TransportError
from quanta.sparql import results
from quanta.sparql.reader import Row, row_from_json


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
    tsv = results.writer("tsv")
    rows: list[Row] = []
    head: list[str] | None = None
    boolean = None
    try:
        with QuantaClient(args.url, api_key=args.api_key) as client:
            for n, page in enumerate(client.pages(args.dataset, text, plan=args.plan), start=1):
                if args.stats:
                    print(f"page {n}: {len(page.bindings)} results {json.dumps(page.stats)}", file=sys.stderr)
                boolean = page.boolean
                if head is None and page.head:
                    head = page.head
                    if args.format == "tsv":
                        out.write(tsv.head(head))
                page_rows = [row_from_json(head or [], b) for b in page.bindings]
                if args.format == "json":
                    rows += page_rows
                    continue
                out.write(tsv.rows(page_rows))
                out.flush()
    except ServiceError as e:
        print(f"quanta client: {e}", file=sys.stderr)
        return 1
    except TransportError as e:
        print(f"quanta client: cannot reach {args.url}: {e}", file=sys.stderr)
        return 1
    if args.format == "json":
        out.write(results.write("json", head or [], rows, boolean) + "\n")
    elif boolean is not None:
        out.write(tsv.boolean(boolean))
    return 0
