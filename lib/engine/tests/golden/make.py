"""Write the golden saved plans: one per operator state layout, in the format
that introduced it (v1; v2 for a Tally or TopK at the root, a plan asked for
partial answers; v3 for a LeftJoin, OPTIONAL; v4 for a SemiJoin, (NOT) EXISTS
and MINUS, a Closure, a property path, and a Tally with MIN and MAX; v5 for a Scan over a
range of objects; v6 for a plan run whole: a HashJoin, an exact Tally or TopK). Run once
per format version; never regenerate an existing file: they pin compatibility,
so this only writes the cases whose files are missing.

Each case is a query on the in-repo watdiv-100k, suspended by a step quantum
in the middle of its run (`.plan`), with the rows it must resume to
(`.rows.json`) and the operator kinds its plan must contain."""

import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from quanta.engine.execute import decode, execute, run
from quanta.engine.plan import Plan
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore, open_store
from quanta.plan.v1 import plan_pb2 as pb
from quanta.testkit.engine import StepQuantum, steps_of

HERE = Path(__file__).parent
W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
P = f"PREFIX wsdbm: <{W}> PREFIX sorg: <http://schema.org/> PREFIX rev: <http://purl.org/stuff/rev#>\n"

# name -> (query, steps before the suspension (at most half the run's), operator kinds the plan must hold)
CASES = {
    "v1-scan": (P + "SELECT * WHERE { ?s wsdbm:likes ?o }", 150, {"scan"}),
    "v1-merge-join": (
        P + "SELECT * WHERE { ?s sorg:nationality wsdbm:Country1 . ?s wsdbm:gender wsdbm:Gender0 }",
        40,
        {"merge_join", "scan"},
    ),
    "v1-union": (
        P + "SELECT * WHERE { { ?s wsdbm:likes ?o } UNION { ?s wsdbm:friendOf ?o . ?o wsdbm:likes wsdbm:Product1 } }",
        2000,
        {"union", "index_join", "scan"},
    ),
    "v1-values": (
        P + "SELECT * WHERE { VALUES ?o { wsdbm:Product0 wsdbm:Product1 wsdbm:Product2 } ?s wsdbm:likes ?o }",
        5,
        {"values", "index_join", "scan"},
    ),
    "v1-filter": (
        P + 'SELECT * WHERE { ?s wsdbm:likes ?o . ?o sorg:caption ?c FILTER(CONTAINS(STR(?c), "a")) }',
        300,
        {"filter", "index_join", "scan"},
    ),
    "v1-extend": (
        P + 'SELECT * WHERE { ?s wsdbm:likes ?o BIND(CONCAT(STR(?o), "#") AS ?k) ?s wsdbm:subscribes ?f }',
        200,
        {"extend", "index_join", "scan"},
    ),
    "v1-slice": (P + "SELECT * WHERE { ?s wsdbm:friendOf ?f . ?f wsdbm:likes ?p } LIMIT 40 OFFSET 25", 60, {"slice"}),
    # suspended with its input half read and rows still to hand on (its page held 3 of them)
    "v2-tally": (P + "SELECT ?o (COUNT(*) AS ?n) WHERE { ?s wsdbm:likes ?o } GROUP BY ?o", 300, {"tally", "scan"}),
    "v2-top-k": (P + "SELECT ?s ?o WHERE { ?s wsdbm:likes ?o } ORDER BY DESC(?o) ?s LIMIT 5", 300, {"top_k", "scan"}),
    # suspended inside the right side's run for a left mapping (its matched flag saved)
    "v3-left-join": (
        P + "SELECT * WHERE { ?s sorg:nationality wsdbm:Country5 OPTIONAL { ?s wsdbm:likes ?p . ?p sorg:caption ?c } }",
        40,
        {"left_join", "index_join", "scan"},
    ),
    # suspended inside the right side's run for a left mapping (its decided flag saved)
    "v4-semi-join": (
        P + "SELECT * WHERE { ?s sorg:nationality wsdbm:Country5 . ?s wsdbm:follows ?f "
        "FILTER NOT EXISTS { ?f wsdbm:likes ?p . ?p sorg:caption ?c } MINUS { ?f sorg:nationality wsdbm:Country2 } }",
        60,
        {"semi_join", "scan"},
    ),
    # suspended inside a step of its breadth-first run (the nodes reached so far saved)
    "v4-closure": (
        P + "SELECT * WHERE { wsdbm:Country5 ^sorg:nationality/(wsdbm:follows|wsdbm:friendOf)+ ?u } LIMIT 300",
        3000,
        {"closure", "union", "scan"},
    ),
    # a tally's MIN and MAX kept per row, suspended with rows still to hand on
    "v4-tally-min-max": (
        P + "SELECT ?o (COUNT(*) AS ?n) (MIN(?s) AS ?first) (MAX(?s) AS ?last) WHERE { ?s wsdbm:likes ?o } GROUP BY ?o",
        300,
        {"tally", "scan"},
    ),
    # a scan over a range of objects (WatDiv's dates are plain literals: the FILTER keeps none), mid-range
    "v5-object-range": (
        P + "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
        'SELECT * WHERE { ?s ?p ?d FILTER(?d >= "2002-08-01"^^xsd:date && ?d < "2009-01-01"^^xsd:date) }',
        300,
        {"filter", "scan"},
    ),
    # run whole: two groups hash-joined, ordered, suspended with the right side's table built and
    # the left side's groups half tallied
    "v6-whole-join": (
        P + "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
        "SELECT ?p (xsd:float(?likes) / ?reviews AS ?ratio) WHERE { "
        "{ SELECT ?p (COUNT(?u) AS ?likes) WHERE { ?u wsdbm:likes ?p } GROUP BY ?p } "
        "{ SELECT ?p (COUNT(?r) AS ?reviews) WHERE { ?p rev:hasReview ?r } GROUP BY ?p } "
        "} ORDER BY DESC(xsd:float(?likes) / ?reviews) ?p LIMIT 15",
        100_000,
        {"hash_join", "tally", "top_k", "extend", "scan"},
    ),
    # run whole: an exact tally's SUM, MIN and MAX per group, mid-input, under an exact top-k
    "v6-whole-tally": (
        P + "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
        "SELECT ?u (SUM(xsd:integer(?r)) AS ?total) (SUM(xsd:double(?r) / 3) AS ?third) (MIN(?r) AS ?lo) "
        "(MAX(?v) AS ?last) WHERE { ?v rev:reviewer ?u ; rev:rating ?r } GROUP BY ?u ORDER BY DESC(?total) ?u LIMIT 20",
        100_000,
        {"tally", "top_k", "scan"},
    ),
}
PAGE_ROWS = {"v2-tally": 3, "v2-top-k": 2, "v4-tally-min-max": 3}  # the plans asked for partial answers
WHOLE = {"v6-whole-join", "v6-whole-tally"}  # the plans run whole


def kinds(op: pb.Operator) -> set[str]:
    """The operator kinds of a plan tree (a merge join's right side is a scan)."""
    kind = op.WhichOneof("op")
    found = {kind}
    for _, value in getattr(op, kind).ListFields():
        children = value if isinstance(value, Sequence) else [value]
        for child in children:
            if isinstance(child, pb.Operator):
                found |= kinds(child)
            elif isinstance(child, pb.Scan):
                found.add("scan")
    return found


def write(store: TripleStore, name: str, query: str, steps: int, expected: set[str]) -> None:
    partial, whole = name in PAGE_ROWS, name in WHOLE
    plan = compile_query(query, store, partial, whole)
    assert kinds(pb.PhysicalPlan.FromString(plan.description).root) >= expected, name
    if not partial:
        steps = min(steps, steps_of(store, query, whole)[1] // 2)  # suspended in the middle of the run
    quantum = StepQuantum(steps)
    plan.ctx.quantum = quantum
    _, done = run(plan, quantum, PAGE_ROWS.get(name))
    assert not done, f"{name}: finished within {steps} steps"
    saved = plan.save()
    resumed = Plan.load(saved, store, Quantum(None))
    rows, done = run(resumed, resumed.ctx.quantum)
    assert done
    (HERE / f"{name}.rq").write_text(query + "\n")
    (HERE / f"{name}.plan").write_bytes(saved)
    (HERE / f"{name}.rows.json").write_text(json.dumps([list(r) for r in decode(resumed, rows)]) + "\n")
    print(name, len(saved), "bytes,", len(rows), "rows")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "watdiv-100k.hdt"
        shutil.copy(HERE.parents[3] / "data" / "watdiv-100k.hdt", copy)
        store = open_store(str(copy), name="watdiv-100k")
        if not (HERE / "v1-join.plan").exists():  # the first golden plan: 5 rows, then suspended
            page = execute(store, query=(HERE / "v1-join.rq").read_text(), quantum_seconds=None, max_results=5)
            assert page.next is not None
            (HERE / "v1-join.plan").write_bytes(page.next)
            rest = execute(store, saved=page.next, quantum_seconds=None)
            (HERE / "v1-join.rows.json").write_text(json.dumps([list(r) for r in rest.rows]) + "\n")
        for name, (query, steps, expected) in CASES.items():
            if "--check" in sys.argv:
                plan = compile_query(query, store, name in PAGE_ROWS, name in WHOLE)
                print(name, sorted(kinds(pb.PhysicalPlan.FromString(plan.description).root)))
            elif not (HERE / f"{name}.plan").exists():
                write(store, name, query, steps, expected)


if __name__ == "__main__":
    main()
