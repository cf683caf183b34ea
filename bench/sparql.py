"""Full SPARQL on WatDiv: quanta's `/sparql` against Fuseki, Oxigraph and Virtuoso, one client.

Issue 19: a set of 56 queries in WatDiv's vocabulary, 7 in each of 8 kinds (GROUP BY and
aggregates, DISTINCT, ORDER BY, OPTIONAL, MINUS, FILTER (NOT) EXISTS, subqueries, property
paths), the total time of one client running them against each system.

    python bench/sparql.py [--dataset 1m|100k] [--rounds 3] [--engines quanta,fuseki,oxigraph,virtuoso]
                           [--timeout 60] [--fuseki memory|tdb2] [--queries A,H7] [--out FILE] [--render FILE]

The systems (bench/peers.py) all serve the same data at once: quanta (`quanta up`, 2 workers,
75 ms quantum) a copy of the WatDiv HDT file; Apache Jena Fuseki 5.6 (scripts/jena.sh), Oxigraph's
server (`oxigraph serve-read-only` over RocksDB) and Virtuoso 7 (its bulk loader) the same triples
from the N-Triples file, copied under /tmp/quanta-bench/sparql first (never into the shared folder).
Each query goes to one system after the other, never two at once, the first of them rotating from
one query (and round) to the next; one untimed warm-up pass, then `--rounds` timed ones: per query
and system the median, the time from sending the request to the last byte of the answer (SPARQL
JSON over a fresh HTTP connection). A query not answered within `--timeout` seconds is a timeout
(not run again by that system). Every answer is checked against Oxigraph's: the same multiset of
rows (numbers compared by value, to 6 significant digits; a GROUP_CONCAT as the multiset of its
parts), in the same order where the query's order is total; a differing answer is reported per
system and query, its time still counted.

Writes bench/results/sparql.json and the `sparql` block of docs/benchmarks.md (with `--out`
only that file; with `--queries`, a part of the set, only /tmp/quanta-bench/sparql/sparql-part.json).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import benchlib  # bench/, the script's own folder
import peers  # bench/: the systems' loaders and servers

from quanta.testkit.data import shared_dir

REPO = benchlib.REPO
WATDIV = shared_dir() / "datasets" / "watdiv"
WORK = Path(tempfile.gettempdir()) / "quanta-bench" / "sparql"
ENGINES = ("quanta", "fuseki", "oxigraph", "virtuoso")
REFERENCE = "oxigraph"
GRAPH = "http://watdiv.example/"  # Virtuoso's graph for the data
# Virtuoso's default graph is the union of all its graphs, its own system graphs among them: it is
# asked to read the data's graph alone (the others hold the data alone)
PARAMETERS = {"virtuoso": {"default-graph-uri": GRAPH}}
JENA_VERSION = "5.6.0"  # the Fuseki 5.6 (bench/bsbm.py keeps scripts/jena.sh's default)
XSD = "http://www.w3.org/2001/XMLSchema#"
NUMERIC = {XSD + t for t in ("integer", "decimal", "double", "float", "int", "long", "short", "byte",
                             "nonNegativeInteger", "positiveInteger", "negativeInteger", "nonPositiveInteger",
                             "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte")}  # fmt: skip

PREFIXES = """PREFIX wsdbm: <http://db.uwaterloo.ca/~galuc/wsdbm/>
PREFIX sorg: <http://schema.org/>
PREFIX rev: <http://purl.org/stuff/rev#>
PREFIX gr: <http://purl.org/goodrelations/>
PREFIX foaf: <http://xmlns.com/foaf/>
PREFIX dc: <http://purl.org/dc/terms/>
PREFIX gn: <http://www.geonames.org/ontology#>
PREFIX mo: <http://purl.org/ontology/mo/>
PREFIX og: <http://ogp.me/ns#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
"""


@dataclass(frozen=True)
class Query:
    """One query of the set. `ordered`: its ORDER BY is total, so the rows' order is compared too.
    `concat`: (variable, separator) of a GROUP_CONCAT, whose parts come in no specified order."""

    name: str
    title: str
    text: str
    ordered: bool = False
    concat: tuple[str, str] | None = None

    @property
    def category(self) -> str:
        return self.name[0]


CATEGORIES = {
    "A": "GROUP BY and aggregates",
    "B": "DISTINCT and COUNT DISTINCT",
    "C": "ORDER BY",
    "D": "OPTIONAL",
    "E": "MINUS",
    "F": "FILTER (NOT) EXISTS",
    "G": "subqueries",
    "H": "property paths",
}

# WatDiv's data (watdiv-1m): 10,000 users (friendOf 441 k, follows 327 k, likes 12 k triples), 2,500
# products, 15,000 reviews and purchases, 9,000 offers from 120 retailers, 240 cities, 25 countries.
# Every literal is plain: numbers are cast (xsd:integer) where they are summed, compared or sorted.
QUERIES = [
    # ---- A: GROUP BY and aggregates
    Query("A1", "COUNT of reviews per product",
          "SELECT ?p (COUNT(?r) AS ?n) WHERE { ?p rev:hasReview ?r } GROUP BY ?p"),
    Query("A2", "SUM of purchase prices per user",
          "SELECT ?u (SUM(xsd:integer(?price)) AS ?spent) WHERE { ?u wsdbm:makesPurchase ?x . ?x gr:price ?price }"
          " GROUP BY ?u"),
    Query("A3", "AVG rating per product",
          "SELECT ?p (AVG(xsd:integer(?rating)) AS ?avg) WHERE { ?p rev:hasReview ?r . ?r rev:rating ?rating }"
          " GROUP BY ?p"),
    Query("A4", "MIN, MAX, COUNT of offer prices per retailer",
          "SELECT ?s (MIN(xsd:integer(?price)) AS ?low) (MAX(xsd:integer(?price)) AS ?high) (COUNT(?o) AS ?n)"
          " WHERE { ?s gr:offers ?o . ?o gr:price ?price } GROUP BY ?s"),
    Query("A5", "GROUP_CONCAT of the topics of each typed product or subgenre",
          "SELECT ?s (GROUP_CONCAT(STR(?t); SEPARATOR=' ') AS ?topics) (COUNT(?t) AS ?n)"
          " WHERE { ?s rdf:type ?genre . ?s og:tag ?t } GROUP BY ?s",
          concat=("topics", " ")),
    Query("A6", "HAVING: users following more than 80",
          "SELECT ?u (COUNT(?v) AS ?n) WHERE { ?u wsdbm:follows ?v } GROUP BY ?u HAVING (COUNT(?v) > 80)"),
    Query("A7", "friendships per gender (441 k-row join)",
          "SELECT ?g (COUNT(*) AS ?n) (COUNT(DISTINCT ?u) AS ?users)"
          " WHERE { ?u wsdbm:gender ?g . ?u wsdbm:friendOf ?f } GROUP BY ?g"),
    # ---- B: DISTINCT and COUNT DISTINCT
    Query("B1", "DISTINCT liked products", "SELECT DISTINCT ?p WHERE { ?u wsdbm:likes ?p }"),
    Query("B2", "COUNT DISTINCT friendOf objects (441 k rows)",
          "SELECT (COUNT(DISTINCT ?f) AS ?n) WHERE { ?u wsdbm:friendOf ?f }"),
    Query("B3", "COUNT DISTINCT buyers per product category",
          "SELECT ?cat (COUNT(DISTINCT ?u) AS ?buyers) WHERE { ?u wsdbm:makesPurchase ?x . ?x wsdbm:purchaseFor ?p ."
          " ?p rdf:type ?cat } GROUP BY ?cat"),
    Query("B4", "DISTINCT (city, gender) pairs",
          "SELECT DISTINCT ?city ?g WHERE { ?u dc:Location ?city . ?u wsdbm:gender ?g }"),
    Query("B5", "DISTINCT topics of liked products",
          "SELECT DISTINCT ?topic WHERE { ?u wsdbm:likes ?p . ?p og:tag ?topic }"),
    Query("B6", "COUNT DISTINCT friends of friends of one user",
          "SELECT (COUNT(DISTINCT ?f2) AS ?n) WHERE { wsdbm:User4 wsdbm:friendOf ?f1 . ?f1 wsdbm:friendOf ?f2 }"),
    Query("B7", "DISTINCT (language, region) of offered products",
          "SELECT DISTINCT ?lang ?country WHERE { ?o gr:includes ?p . ?p sorg:language ?lang ."
          " ?o sorg:eligibleRegion ?country }"),
    # ---- C: ORDER BY, with and without LIMIT (every order total)
    Query("C1", "top 20 ratings, LIMIT",
          "SELECT ?r ?rating WHERE { ?r rev:rating ?rating } ORDER BY DESC(xsd:integer(?rating)) ?r LIMIT 20",
          ordered=True),
    Query("C2", "every offer by price (9,000 rows)",
          "SELECT ?o ?price WHERE { ?o gr:includes ?p . ?o gr:price ?price } ORDER BY xsd:integer(?price) ?o",
          ordered=True),
    Query("C3", "user ids, LIMIT with OFFSET",
          "SELECT ?u ?id WHERE { ?u wsdbm:userId ?id } ORDER BY ?id ?u LIMIT 10 OFFSET 100", ordered=True),
    Query("C4", "top 25 friendships of users with a job title (22 k rows)",
          "SELECT ?u ?f WHERE { ?u sorg:jobTitle ?j . ?u wsdbm:friendOf ?f } ORDER BY DESC(?f) ?u LIMIT 25",
          ordered=True),
    Query("C5", "most liked products, GROUP BY then ORDER BY",
          "SELECT ?p (COUNT(?u) AS ?n) WHERE { ?u wsdbm:likes ?p } GROUP BY ?p ORDER BY DESC(?n) ?p LIMIT 10",
          ordered=True),
    Query("C6", "every named user by family and given name (7 k rows)",
          "SELECT ?u ?given ?family WHERE { ?u foaf:givenName ?given . ?u foaf:familyName ?family }"
          " ORDER BY ?family ?given ?u", ordered=True),
    Query("C7", "latest 50 purchases by date",
          "SELECT ?x ?date WHERE { ?x wsdbm:purchaseDate ?date } ORDER BY DESC(?date) ?x LIMIT 50", ordered=True),
    # ---- D: OPTIONAL
    Query("D1", "every user, OPTIONAL email",
          "SELECT ?u ?e WHERE { ?u wsdbm:userId ?id OPTIONAL { ?u sorg:email ?e } }"),
    Query("D2", "products, two OPTIONALs",
          "SELECT ?p ?desc ?rating WHERE { ?p og:title ?t OPTIONAL { ?p sorg:description ?desc }"
          " OPTIONAL { ?p sorg:contentRating ?rating } }"),
    Query("D3", "users, nested OPTIONAL (city, its country)",
          "SELECT ?u ?city ?country WHERE { ?u wsdbm:userId ?id"
          " OPTIONAL { ?u dc:Location ?city OPTIONAL { ?city gn:parentCountry ?country } } }"),
    Query("D4", "reviews, OPTIONAL with a FILTER inside",
          "SELECT ?r ?votes WHERE { ?r rev:rating ?rating"
          " OPTIONAL { ?r rev:totalVotes ?votes FILTER (xsd:integer(?votes) > 500) } }"),
    Query("D5", "heavy: COUNT over 327 k follows, OPTIONAL email",
          "SELECT (COUNT(*) AS ?n) (COUNT(?e) AS ?emails) WHERE { ?u wsdbm:follows ?v OPTIONAL { ?v sorg:email ?e } }"),
    Query("D6", "OPTIONAL with !BOUND: products without reviews",
          "SELECT ?p WHERE { ?p og:title ?t OPTIONAL { ?p rev:hasReview ?r } FILTER (!BOUND(?r)) }"),
    Query("D7", "likes, OPTIONAL the liker's own review (3 patterns)",
          "SELECT ?u ?p ?rating WHERE { ?u wsdbm:likes ?p"
          " OPTIONAL { ?p rev:hasReview ?r . ?r rev:reviewer ?u . ?r rev:rating ?rating } }"),
    # ---- E: MINUS
    Query("E1", "users without an email",
          "SELECT ?u WHERE { ?u wsdbm:userId ?id MINUS { ?u sorg:email ?e } }"),
    Query("E2", "products nobody likes",
          "SELECT ?p WHERE { ?p og:title ?t MINUS { ?u wsdbm:likes ?p } }"),
    Query("E3", "follows that are not friendships, users with a job title",
          "SELECT ?u ?v WHERE { ?u sorg:jobTitle ?j . ?u wsdbm:follows ?v MINUS { ?u wsdbm:friendOf ?v } }"),
    Query("E4", "MINUS sharing no variable (removes nothing)",
          "SELECT ?c WHERE { ?c gn:parentCountry ?k MINUS { ?x sorg:jobTitle ?y } }"),
    Query("E5", "products with no actor or author, MINUS a UNION",
          "SELECT ?p WHERE { ?p rdf:type ?cat MINUS { { ?p sorg:actor ?a } UNION { ?p sorg:author ?a } } }"),
    Query("E6", "reviews but those of a liker, MINUS a join",
          "SELECT ?p ?r WHERE { ?p rev:hasReview ?r MINUS { ?r rev:reviewer ?u . ?u wsdbm:likes ?p } }"),
    Query("E7", "COUNT of friendships not followed back (441 k rows)",
          "SELECT (COUNT(*) AS ?n) WHERE { ?u wsdbm:friendOf ?f MINUS { ?f wsdbm:follows ?u } }"),
    # ---- F: FILTER (NOT) EXISTS
    Query("F1", "users who bought nothing",
          "SELECT ?u WHERE { ?u wsdbm:userId ?id FILTER NOT EXISTS { ?u wsdbm:makesPurchase ?x } }"),
    Query("F2", "products with a 5-star review",
          "SELECT ?p WHERE { ?p og:title ?t FILTER EXISTS { ?p rev:hasReview ?r . ?r rev:rating '5' } }"),
    Query("F3", "offers of a product someone bought",
          "SELECT ?o ?p WHERE { ?o gr:includes ?p FILTER EXISTS { ?x wsdbm:purchaseFor ?p } }"),
    Query("F4", "friendships not returned, users with a job title",
          "SELECT ?u ?f WHERE { ?u sorg:jobTitle ?j . ?u wsdbm:friendOf ?f"
          " FILTER NOT EXISTS { ?f wsdbm:friendOf ?u } }"),
    Query("F5", "EXISTS and NOT EXISTS in one expression",
          "SELECT ?u WHERE { ?u wsdbm:userId ?id"
          " FILTER (EXISTS { ?u sorg:email ?e } && !EXISTS { ?u foaf:givenName ?g }) }"),
    Query("F6", "NOT EXISTS sharing no variable (removes everything)",
          "SELECT ?c WHERE { ?c gn:parentCountry ?k FILTER NOT EXISTS { ?x sorg:jobTitle ?y } }"),
    Query("F7", "reviews with votes per product, EXISTS under GROUP BY",
          "SELECT ?p (COUNT(?r) AS ?n) WHERE { ?p rev:hasReview ?r FILTER EXISTS { ?r rev:totalVotes ?v } }"
          " GROUP BY ?p"),
    # ---- G: subqueries
    Query("G1", "users with over 200 friends, FILTER over an aggregating subquery",
          "SELECT ?u ?n WHERE { { SELECT ?u (COUNT(?f) AS ?n) WHERE { ?u wsdbm:friendOf ?f } GROUP BY ?u }"
          " FILTER (?n > 200) }"),
    Query("G2", "titles of the 10 most liked products, top-k subquery",
          "SELECT ?p ?title ?n WHERE { { SELECT ?p (COUNT(?u) AS ?n) WHERE { ?u wsdbm:likes ?p } GROUP BY ?p"
          " ORDER BY DESC(?n) ?p LIMIT 10 } ?p og:title ?title }"),
    Query("G3", "COUNT over a DISTINCT subquery",
          "SELECT (COUNT(*) AS ?n) WHERE { { SELECT DISTINCT ?u ?p WHERE { ?u wsdbm:makesPurchase ?x ."
          " ?x wsdbm:purchaseFor ?p } } }"),
    Query("G4", "aggregates of aggregates (327 k follows)",
          "SELECT (AVG(?n) AS ?avg) (MAX(?n) AS ?max) (COUNT(*) AS ?users) WHERE {"
          " { SELECT ?u (COUNT(?v) AS ?n) WHERE { ?u wsdbm:follows ?v } GROUP BY ?u } }"),
    Query("G5", "offers dearer than the mean price + 450, a one-row subquery",
          "SELECT ?o ?price WHERE { ?o gr:includes ?p . ?o gr:price ?price"
          " { SELECT (AVG(xsd:integer(?q)) AS ?mean) WHERE { ?x gr:includes ?y . ?x gr:price ?q } }"
          " FILTER (xsd:integer(?price) > ?mean + 450) }"),
    Query("G6", "first 100 users, OPTIONAL email, ORDER BY LIMIT subquery",
          "SELECT ?u ?e WHERE { { SELECT ?u WHERE { ?u wsdbm:userId ?id } ORDER BY ?u LIMIT 100 }"
          " OPTIONAL { ?u sorg:email ?e } }"),
    Query("G7", "users following more than they befriend, two subqueries joined",
          "SELECT ?u ?friends ?follows WHERE {"
          " { SELECT ?u (COUNT(?f) AS ?friends) WHERE { ?u wsdbm:friendOf ?f } GROUP BY ?u }"
          " { SELECT ?u (COUNT(?v) AS ?follows) WHERE { ?u wsdbm:follows ?v } GROUP BY ?u }"
          " FILTER (?follows > 2 * ?friends) }"),
    # ---- H: property paths
    Query("H1", "(city|country)*: the places of users with a job title (zero or more)",
          "SELECT ?u ?place WHERE { ?u sorg:jobTitle ?j . ?u (dc:Location|gn:parentCountry)* ?place }"),
    Query("H2", "friendOf+ from one user (one or more)",
          "SELECT ?x WHERE { wsdbm:User4 wsdbm:friendOf+ ?x }"),
    Query("H3", "friendOf? of users with a job title (zero or one)",
          "SELECT ?u ?x WHERE { ?u sorg:jobTitle ?j . ?u wsdbm:friendOf? ?x }"),
    Query("H4", "sequence: each user's country",
          "SELECT ?u ?c WHERE { ?u dc:Location/gn:parentCountry ?c }"),
    Query("H5", "alternative: a product's people",
          "SELECT ?p ?person WHERE { ?p sorg:actor|sorg:author|sorg:director|mo:artist ?person }"),
    Query("H6", "inverse in a sequence: who likes what one user likes",
          "SELECT DISTINCT ?v WHERE { wsdbm:User0 wsdbm:likes/^wsdbm:likes ?v }"),
    Query("H7", "ASK: a follows+ path between two users",
          "ASK { wsdbm:User0 wsdbm:follows+ wsdbm:User9999 }"),
]  # fmt: skip


# ---- one query over HTTP ---------------------------------------------------------------------


@dataclass
class Answer:
    """What a system answered: its status (ok, timeout, error), seconds to the last byte, and the
    rows, normalised (`rows`: a multiset digest's input, in the order received)."""

    status: str
    seconds: float | None = None
    rows: list[tuple[str, ...]] | None = None
    error: str = ""


def ask(url: str, text: str, timeout: float, parameters: dict[str, str]) -> tuple[str, float | None, bytes, str]:
    """POST one query, Accept SPARQL JSON, over a fresh connection: (status, seconds, body, error)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(str(parts.hostname), parts.port, timeout=timeout)
    body = urlencode({"query": text, **parameters})
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/sparql-results+json"}
    started = time.perf_counter()
    chunks: list[bytes] = []
    try:
        connection.request("POST", parts.path, body=body, headers=headers)
        response = connection.getresponse()
        while chunk := response.read1(1 << 16):
            chunks.append(chunk)
            if time.perf_counter() - started > timeout:
                raise TimeoutError
        seconds = time.perf_counter() - started
        if response.status != 200:
            return "error", seconds, b"", f"HTTP {response.status}: {b''.join(chunks)[:300].decode(errors='replace')}"
        return "ok", seconds, b"".join(chunks), ""
    except TimeoutError:  # socket.timeout too
        return "timeout", None, b"", f"no complete answer in {timeout:g} s"
    except (OSError, http.client.HTTPException) as error:
        return "error", None, b"", f"{type(error).__name__}: {error}"
    finally:
        connection.close()


def term(value: dict[str, str]) -> str:
    """A SPARQL JSON term as one string, numbers by value (6 significant digits past the point)."""
    kind, text = value.get("type"), value.get("value", "")
    if kind == "uri":
        return f"<{text}>"
    if kind == "bnode":
        return "_:"  # blank nodes are not compared by label
    datatype, lang = value.get("datatype"), value.get("xml:lang")
    if lang:
        return f'"{text}"@{lang.lower()}'
    if datatype in NUMERIC:
        try:
            number = Decimal(text.strip())
        except InvalidOperation:
            return f'"{text}"^^<{datatype}>'
        if number == number.to_integral_value():
            return str(int(number))
        return f"{float(number):.6g}"
    if datatype and datatype != XSD + "string":
        return f'"{text}"^^<{datatype}>'
    return f'"{text}"'


def normalise(body: bytes, query: Query) -> list[tuple[str, ...]]:
    """The rows of a SPARQL JSON answer, each a tuple over the variables in name order (ASK: one
    row, its boolean)."""
    data = json.loads(body)
    if "boolean" in data:
        return [(str(bool(data["boolean"])).lower(),)]
    names = sorted(data["head"].get("vars", []))
    rows = []
    for binding in data["results"]["bindings"]:
        row = []
        for name in names:
            value = term(binding[name]) if name in binding else ""
            if query.concat and name == query.concat[0] and value:
                separator = query.concat[1]
                value = separator.join(sorted(value.strip('"').split(separator)))
            row.append(value)
        rows.append(tuple(row))
    return rows


def run(server: peers.Server, query: Query, timeout: float) -> Answer:
    status, seconds, body, error = ask(server.url, PREFIXES + query.text, timeout, PARAMETERS.get(server.name, {}))
    if status != "ok":
        return Answer(status, seconds, None, error)
    try:
        return Answer("ok", seconds, normalise(body, query))
    except (ValueError, KeyError, TypeError) as problem:
        return Answer("error", seconds, None, f"unreadable answer: {problem}; {body[:200]!r}")


def digest(rows: list[tuple[str, ...]]) -> str:
    return hashlib.sha256(json.dumps(sorted(rows)).encode()).hexdigest()[:16]


def compare(query: Query, rows: list[tuple[str, ...]], reference: list[tuple[str, ...]]) -> str:
    """'' if `rows` answer as `reference` does, else what differs, in a sentence."""
    if len(rows) != len(reference):
        got, want = Counter(rows), Counter(reference)
        extra, missing = list((got - want).elements()), list((want - got).elements())
        return f"{len(rows)} rows, not {len(reference)}" + _examples(extra, missing)
    if Counter(rows) != Counter(reference):
        got, want = Counter(rows), Counter(reference)
        extra, missing = list((got - want).elements()), list((want - got).elements())
        return f"same row count, {len(extra)} rows differ" + _examples(extra, missing)
    if query.ordered and rows != reference:
        first = next(i for i, (a, b) in enumerate(zip(rows, reference, strict=True)) if a != b)
        return f"same rows in another order (from row {first + 1}: {rows[first]} where {reference[first]})"
    return ""


def _examples(extra: list[tuple[str, ...]], missing: list[tuple[str, ...]]) -> str:
    parts = []
    if extra:
        parts.append(f"e.g. {sorted(extra)[0]} not in the reference")
    if missing:
        parts.append(f"e.g. {sorted(missing)[0]} missing")
    return " (" + "; ".join(parts) + ")" if parts else ""


# ---- the measurement ---------------------------------------------------------------------------


def prepare(dataset: str) -> tuple[Path, Path]:
    """Copies of the WatDiv HDT file (quanta writes its side index beside it) and of the N-Triples,
    unpacked, under WORK; made once and kept."""
    WORK.mkdir(parents=True, exist_ok=True)
    hdt, ntriples = WORK / f"watdiv-{dataset}.hdt", WORK / f"watdiv-{dataset}.nt"
    source = WATDIV / hdt.name
    if not hdt.exists() or hdt.stat().st_size != source.stat().st_size:
        for stale in WORK.glob(hdt.name + "*"):
            stale.unlink()
        shutil.copy(source, hdt)
    if not ntriples.exists():
        partial = ntriples.with_suffix(".part")
        with gzip.open(WATDIV / f"watdiv-{dataset}.nt.gz") as packed, open(partial, "wb") as plain:
            shutil.copyfileobj(packed, plain)
        partial.rename(ntriples)
    return hdt, ntriples


def start(name: str, stack: ExitStack, hdt: Path, ntriples: Path, out: Path, args: argparse.Namespace) -> peers.Server:
    if name == "quanta":
        return peers.start_quanta(stack, hdt, out, workers=args.workers, quantum_ms=args.quantum_ms, dataset="watdiv")
    if name == "fuseki":
        return peers.start_fuseki(
            stack, ntriples, out, storage=args.fuseki, heap=args.fuseki_heap, dataset="watdiv", version=JENA_VERSION
        )
    if name == "oxigraph":
        return peers.start_oxigraph(stack, ntriples, out)
    if name == "virtuoso":
        return peers.start_virtuoso(stack, ntriples, out, gb=args.virtuoso_gb, graph=GRAPH)
    raise ValueError(name)


def measure(servers: list[peers.Server], queries: list[Query], rounds: int, timeout: float) -> dict[str, Any]:
    """Every query against every system, one at a time: a warm-up pass, then `rounds` timed ones."""
    names = [s.name for s in servers]
    times: dict[tuple[str, str], list[float]] = {}
    first: dict[tuple[str, str], Answer] = {}  # the warm-up's answer, compared with the reference's
    digests: dict[tuple[str, str], str] = {}  # of the warm-up's rows: each later answer must match
    failed: dict[tuple[str, str], Answer] = {}  # a timeout or error: not run again
    changed: dict[tuple[str, str], str] = {}  # an answer unlike the same system's first one
    for number in range(rounds + 1):
        label = "warm-up" if number == 0 else f"round {number}/{rounds}"
        started = time.perf_counter()
        for i, query in enumerate(queries):
            shift = (i + number) % len(servers)
            for server in servers[shift:] + servers[:shift]:
                key = (query.name, server.name)
                if key in failed:
                    continue
                answer = run(server, query, timeout)
                if answer.status != "ok":
                    failed[key] = answer
                    log(f"{label}: {query.name} {server.name}: {answer.status} {answer.error[:200]}")
                    continue
                assert answer.rows is not None and answer.seconds is not None
                if number == 0:
                    first[key], digests[key] = answer, digest(answer.rows)
                else:
                    times.setdefault(key, []).append(answer.seconds)
                    if key not in changed and digest(answer.rows) != digests[key]:
                        before = len(first[key].rows or [])
                        changed[key] = (
                            f"round {number} gave another answer ({len(answer.rows)} rows, the warm-up {before})"
                        )
        log(f"{label}: {time.perf_counter() - started:.1f} s")
    out: dict[str, Any] = {}
    for query in queries:
        reference = first.get((query.name, REFERENCE))
        entry: dict[str, Any] = {
            "category": query.category,
            "title": query.title,
            "text": query.text,
            "reference_rows": len(reference.rows or []) if reference else None,
            "engines": {},
        }
        for name in names:
            key = (query.name, name)
            if key in failed:
                entry["engines"][name] = {"status": failed[key].status, "seconds": None, "error": failed[key].error}
                continue
            answer = first[key]
            rows = answer.rows or []
            result: dict[str, Any] = {
                "status": "ok",
                "seconds": round(statistics.median(times[key]), 4),
                "runs": [round(t, 4) for t in times[key]],
                "rows": len(rows),
                "digest": digest(rows),
            }
            if reference is None:
                result["status"] = "unchecked"
            elif name != REFERENCE and (difference := compare(query, rows, reference.rows or [])):
                result |= {"status": "differs", "difference": difference}
            if key in changed:
                result["difference"] = "; ".join(filter(None, [result.get("difference"), changed[key]]))
                result["status"] = "differs"
            entry["engines"][name] = result
        out[query.name] = entry
    return out


def versus(queries: dict[str, Any], peer: str, only: set[str] | None = None) -> dict[str, Any]:
    """quanta's and `peer`'s total seconds over the queries (of `only`) both answered, and their ratio."""
    both = [
        e["engines"]
        for q, e in queries.items()
        if (only is None or q in only)
        and e["engines"]["quanta"]["seconds"] is not None
        and e["engines"][peer]["seconds"] is not None
    ]
    mine, theirs = sum(e["quanta"]["seconds"] for e in both), sum(e[peer]["seconds"] for e in both)
    return {
        "queries": len(both),
        "quanta_seconds": round(mine, 3),
        "peer_seconds": round(theirs, 3),
        "quanta_over_peer": round(mine / theirs, 2) if theirs else None,
    }


def summarise(queries: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Per system: the total of its medians over the queries it answered, its statuses, per kind of
    query. Against each peer: quanta's total over the queries both answered, over the peer's. The
    headline ratio is the highest of those: quanta against the peer it compares worst with (the
    fastest, when every system answers every query)."""
    totals: dict[str, Any] = {}
    for name in names:
        statuses = Counter(e["engines"][name]["status"] for e in queries.values())
        answered = {q for q, e in queries.items() if e["engines"][name]["seconds"] is not None}

        def total(which: set[str], name: str = name) -> float:
            return round(sum(float(queries[q]["engines"][name]["seconds"]) for q in which), 3)

        categories = {}
        for c in CATEGORIES:
            inside = {q for q in answered if queries[q]["category"] == c}
            categories[c] = {"seconds": total(inside), "answered": len(inside)}
        totals[name] = {
            "seconds": total(answered),
            "answered": len(answered),
            "ok": statuses["ok"] + statuses["unchecked"],
            "differs": statuses["differs"],
            "timeouts": statuses["timeout"],
            "errors": statuses["error"],
            "categories": categories,
        }
    against = {n: versus(queries, n) for n in names if n != "quanta"} if "quanta" in names else {}
    ratio = None
    rated = {n: v for n, v in against.items() if v["quanta_over_peer"] is not None}
    if rated:
        peer = max(rated, key=lambda n: rated[n]["quanta_over_peer"])
        ratio = {"peer": peer, **rated[peer]}
    return {"of": len(queries), "engines": totals, "versus": against, "ratio": ratio}


STARTED = time.monotonic()


def log(message: str) -> None:
    """A progress line, with the time since the start."""
    elapsed = int(time.monotonic() - STARTED)
    print(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", flush=True)


# ---- the report --------------------------------------------------------------------------------


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def _cell(engine: dict[str, Any]) -> str:
    if engine["status"] == "timeout":
        return "timeout"
    if engine["status"] == "error":
        return "error"
    return _s(engine["seconds"]) + (" ✗" if engine["status"] == "differs" else "")


def render(result: dict[str, Any], docs: Path = REPO / "docs" / "benchmarks.md") -> None:
    """The `sparql` block of docs/benchmarks.md: totals, per kind of query, per query, differences."""
    names, summary, queries, m = result["engines"], result["summary"], result["queries"], result["machine"]
    title = {"quanta": "quanta", "fuseki": "Fuseki", "oxigraph": "Oxigraph", "virtuoso": "Virtuoso"}
    others = [n for n in names if n != "quanta"]
    lines = [
        f"Produced by `{result['command']}` on {m['date'][:10]} (git {m['git_commit'][:10]}"
        f"{' + local changes' if m['git_dirty'] else ''}; {m['cpu']}, {m['nproc']} cores, {m['memory_gb']} GB, load "
        f"average at start {m['load_average_at_start'][0]}) over watdiv-{result['dataset']} "
        f"({result['triples']:,} triples). Raw figures: `bench/results/sparql.json`.",
        "",
        f"{len(queries)} queries in WatDiv's vocabulary, {len(CATEGORIES)} kinds of 7 (their texts are in "
        "`bench/sparql.py`), one client: each query sent to one system after the other, never two at once, the "
        "first of them rotating; an untimed warm-up pass, then per query and system the median of "
        f"{result['rounds']} runs, from sending the request to the last byte of the answer (SPARQL JSON, a fresh "
        f"HTTP connection each time; timeout {result['timeout_s']:g} s). Answers are checked against "
        f"{title[REFERENCE]}'s: the multiset of rows (numbers by value), and their order where the query orders "
        "them totally; ✗ marks an answer that differs, listed below the tables with the errors and timeouts.",
        "",
        "Systems: "
        + "; ".join(f"{title[n]}: {result['settings'][n]}" for n in names)
        + "."
        + (
            " Virtuoso is asked to read the data's graph alone (`default-graph-uri`), not its own system graphs too."
            if "virtuoso" in names
            else ""
        ),
    ]
    if result.get("skipped"):
        lines += ["", "Left out: " + "; ".join(f"{title[n]}: {why}" for n, why in result["skipped"].items()) + "."]
    lines += [
        "",
        "| system | total (s) | answered | differing | errors | timeouts | quanta / system, queries both answered |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in names:
        e, v = summary["engines"][name], summary["versus"].get(name)
        against = "" if v is None or v["quanta_over_peer"] is None else f"{v['quanta_over_peer']:.2f} ({v['queries']})"
        lines.append(
            f"| {title[name]} | {e['seconds']:.2f} | {e['answered']} | {e['differs']} | {e['errors']} | "
            f"{e['timeouts']} | {against} |"
        )
    ratio = summary.get("ratio")
    if ratio:
        lines += [
            "",
            f"**quanta / fastest peer: {ratio['quanta_over_peer']:.2f}** ({title[ratio['peer']]}: "
            f"{ratio['quanta_seconds']:.2f} s against {ratio['peer_seconds']:.2f} s over the {ratio['queries']} "
            "queries both answered; the peer quanta compares worst with). The issue's target: at most 0.5.",
        ]
    header = "| " + " | ".join(title[n] for n in names) + (" | quanta / best peer |" if others else " |")
    rule = " ---: |" * (len(names) + bool(others))
    lines += ["", "Per kind of query, seconds (the sum of its medians; a system's unanswered queries left out):", ""]
    lines += ["| kind " + header, "| --- |" + rule]
    for c, label in CATEGORIES.items():
        inside = {q for q, e in queries.items() if e["category"] == c}
        cells = []
        for n in names:
            cat = summary["engines"][n]["categories"][c]
            cells.append(_s(cat["seconds"]) + ("" if cat["answered"] == len(inside) else f" ({cat['answered']})"))
        lines.append(f"| {c}: {label} | " + " | ".join(cells) + _worst(queries, others, inside))
    lines += ["", "Per query, seconds (median):", ""]
    lines += ["| query | rows " + header, "| --- | ---: |" + rule]
    notes = []
    for name, entry in queries.items():
        engines, rows = entry["engines"], entry["reference_rows"]
        cells = [_cell(engines[n]) for n in names]
        count = "-" if rows is None else f"{rows:,}"
        label = f"{name} {entry['title']}".replace("|", "\\|")  # a path's alternative, not a column
        lines.append(f"| {label} | {count} | " + " | ".join(cells) + _worst(queries, others, {name}))
        for n in names:
            if engines[n]["status"] == "differs":
                notes.append(f"- {name}, {title[n]}: {engines[n]['difference']}")
            elif engines[n]["status"] in ("error", "timeout"):
                error = " ".join(engines[n]["error"].split())[:240]
                notes.append(f"- {name}, {title[n]}: {engines[n]['status']}: {error}")
    if notes:
        lines += ["", "Answers that differ from the reference's, errors and timeouts:", "", *notes]
    benchlib.replace_block(docs, "sparql", "\n".join(lines))


def _worst(queries: dict[str, Any], others: list[str], only: set[str]) -> str:
    """The table's last cell: quanta's time over the best peer's, over queries both answered."""
    if not others:
        return " |"
    ratios = [v["quanta_over_peer"] for n in others if (v := versus(queries, n, only))["quanta_over_peer"] is not None]
    return f" | {max(ratios):.2f} |" if ratios else " | - |"


# ---- main --------------------------------------------------------------------------------------


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def describe_machine() -> dict[str, Any]:
    machine = benchlib.machine({"quanta_gateway": "quanta-gateway", "pyoxigraph": "pyoxigraph"})
    try:
        version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        machine["java"] = re.sub(r'.*version "([^"]+)".*', r"\1", version)
    except (OSError, IndexError):
        machine["java"] = "absent"
    return machine


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument("--dataset", choices=["1m", "100k"], default="1m")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds after the warm-up (default 3, at least 1)")
    parser.add_argument(
        "--engines",
        type=lambda t: [e.strip() for e in t.split(",") if e.strip()],
        default=list(ENGINES),
        help=f"among {','.join(ENGINES)} (default all; {REFERENCE} is the reference and always runs)",
    )
    parser.add_argument("--timeout", type=float, default=60, help="seconds per query (default 60)")
    parser.add_argument("--queries", help="only these queries (names, e.g. A1,H7) or kinds (e.g. A,H)")
    parser.add_argument("--workers", type=int, default=2, help="quanta's workers")
    parser.add_argument("--quantum-ms", type=float, default=75)
    parser.add_argument("--fuseki", choices=["memory", "tdb2"], default="memory", help="Fuseki's storage")
    parser.add_argument("--fuseki-heap", default="4g", help="Fuseki's JVM heap (-Xmx)")
    parser.add_argument("--virtuoso-gb", type=float, default=2, help="memory for Virtuoso's buffers, GB")
    parser.add_argument("--out", type=Path, help="where the JSON goes (then the docs are left alone)")
    parser.add_argument("--render", type=Path, help="only rewrite the docs from a saved result")
    args = parser.parse_args()
    if args.render:
        render(json.loads(args.render.read_text()))
        return
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    unknown = [e for e in args.engines if e not in ENGINES]
    if unknown:
        parser.error(f"unknown engines: {unknown}")
    names = [e for e in ENGINES if e in args.engines or e == REFERENCE]
    queries = QUERIES
    if args.queries:
        wanted = {w.strip() for w in args.queries.split(",")}
        queries = [q for q in QUERIES if q.name in wanted or q.category in wanted]
    assert len(QUERIES) == 56 and all(sum(q.category == c for q in QUERIES) == 7 for c in CATEGORIES)

    hdt, ntriples = prepare(args.dataset)
    machine = describe_machine()
    out_dir = WORK / f"run-{args.dataset}"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    skipped: dict[str, str] = {}
    with ExitStack() as stack:
        servers = []
        for name in names:
            log(f"{name}: loading and starting")
            try:
                server = start(name, stack, hdt, ntriples, out_dir, args)
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                if name in ("quanta", REFERENCE):
                    raise
                skipped[name] = str(error)[-400:]
                log(f"{name}: left out: {error}")
                continue
            log(f"{name}: up at {server.url} (load {server.load.get('seconds')} s)")
            servers.append(server)
        measured = measure(servers, queries, args.rounds, args.timeout)
        for server in servers:
            server.memory = peers.memory(server.pid)
    up = [s.name for s in servers]
    command = "python bench/sparql.py " + " ".join(sys.argv[1:])
    result = {
        "command": command.strip(),
        "dataset": args.dataset,
        "triples": count_lines(ntriples),
        "rounds": args.rounds,
        "timeout_s": args.timeout,
        "reference": REFERENCE,
        "engines": up,
        "skipped": skipped,
        "settings": {s.name: s.settings for s in servers},
        "load": {s.name: s.load for s in servers},
        "memory_after": {s.name: s.memory for s in servers},
        "machine": machine,
        "summary": summarise(measured, up),
        "queries": measured,
    }
    whole = len(queries) == len(QUERIES)
    out = args.out or (REPO / "bench" / "results" / "sparql.json" if whole else WORK / "sparql-part.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    for name in up:
        t = result["summary"]["engines"][name]
        print(f"{name:9} {t['seconds']:8.2f} s  answered {t['answered']}, differing {t['differs']}, "
              f"timeouts {t['timeouts']}, errors {t['errors']}")  # fmt: skip
    print(f"ratio: {result['summary']['ratio']}; results: {out}")
    if args.out is None and whole:
        render(result)


if __name__ == "__main__":
    main()
