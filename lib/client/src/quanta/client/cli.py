"""`quanta client URL DATASET QUERY`: run any SPARQL 1.1 query with the smart
client, streaming results as they are known (SELECT and ASK: tsv, csv, json,
xml; CONSTRUCT and DESCRIBE: nt, ttl, rdfxml, jsonld)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from quanta.client.budgets import Budgets
from quanta.client.http import HttpTransport
from quanta.client.requester import RequestEvent
from quanta.client.services import ServiceEndpoint, SparqlEndpoint
from quanta.client.smart import DatasetSpec
from quanta.client.sync import SyncClient
from quanta.client.transport import QueryError
from quanta.sparql import graphs, results
from quanta.sparql.errors import ErrorKind


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="gateway URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("dataset", help="dataset name (see GET /v1/datasets)")
    parser.add_argument("query", help="query text, or @FILE.rq")
    parser.add_argument(
        "--format", help="SELECT/ASK: tsv (default), csv, json or xml; graphs: nt (default), ttl, rdfxml or jsonld"
    )
    parser.add_argument("--default-graph-uri", action="append", help="the default graph (repeatable; merged)")
    parser.add_argument("--named-graph-uri", action="append", help="a named graph of the dataset (repeatable)")
    parser.add_argument(
        "--service", action="append", default=[], metavar="IRI[=URL]",
        help="allow SERVICE <IRI>, a SPARQL endpoint at URL (default: the IRI itself)",
    )  # fmt: skip
    parser.add_argument("--plan", choices=["value", "reference"], help="how the service returns saved plans")
    parser.add_argument("--api-key", help="sent as X-API-Key (rate limits are per key)")
    parser.add_argument("--memory-rows", type=int, help="rows a client-side operator keeps in memory before spilling")
    parser.add_argument(
        "--optional",
        choices=["server", "auto", "bind"],
        default="server",
        help="OPTIONAL over two server pieces: in the server's query (server), or in the client, one query "
        "(auto, OptJoin) or one per block of mappings (bind)",
    )
    parser.add_argument("--stats", action="store_true", help="print the plan and each request on stderr")


def run(args: argparse.Namespace) -> int:
    text = Path(args.query[1:]).read_text() if args.query.startswith("@") else args.query
    services: dict[str, ServiceEndpoint] = {}
    for spec in args.service:
        iri, _, url = spec.partition("=")
        services[iri] = SparqlEndpoint(url or iri)
    budgets = Budgets() if args.memory_rows is None else Budgets(memory_rows=args.memory_rows)
    dataset = DatasetSpec(
        args.dataset,
        tuple(args.default_graph_uri) if args.default_graph_uri else None,
        tuple(args.named_graph_uri) if args.named_graph_uri else None,
    )
    transport = HttpTransport(args.url, api_key=args.api_key, plan=args.plan)
    out = sys.stdout
    try:
        hook = _stats if args.stats else None
        with SyncClient(transport, budgets=budgets, services=services, on_request=hook, optional=args.optional) as c:
            execution = c.query(text, dataset)
            if execution.form in ("construct", "describe"):
                writer = graphs.graph_writer(args.format or "nt")
                out.write(writer.head())
                for triple in execution.triples():
                    out.write(writer.triples([triple]))
                out.write(writer.end())
            else:
                fmt = args.format or "tsv"
                table = results.writer(fmt)
                if execution.form == "ask":
                    out.write(table.boolean(execution.boolean()))
                else:
                    out.write(table.head(execution.variables))
                    for row in execution.solutions():
                        out.write(table.rows([row]))
                        if fmt == "tsv":
                            out.flush()
                    out.write(table.end())
            if args.stats:  # the plan that ran (a query sent whole has pieces only if it needed them)
                print(execution.explain(), file=sys.stderr)
                print(f"{execution.requests} requests, {execution.bytes} bytes", file=sys.stderr)
    except QueryError as e:
        if e.kind is ErrorKind.UNREACHABLE:
            print(f"quanta client: cannot reach {args.url}: {e.message}", file=sys.stderr)
        else:
            print(f"quanta client: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # an unknown --format
        print(f"quanta client: {e}", file=sys.stderr)
        return 2
    finally:
        transport.close()
    out.flush()
    return 0


def _stats(event: RequestEvent) -> None:
    stats = json.dumps(dict(event.stats), separators=(",", ":"))
    request = event.request
    # where operators ran: per quantum (partial answers), or every one of the query's (whole)
    shipped = "" if request is None else " partial" if request.partial else " whole" if request.whole else ""
    print(
        f"{event.name} {event.status}{shipped} {event.elapsed_s * 1000:.1f} ms {event.bytes} B {stats}", file=sys.stderr
    )
