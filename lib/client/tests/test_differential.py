"""The smart client against pyoxigraph (an independent engine) on WatDiv 100K:
variants of the basic queries (OPTIONAL as the SaGe paper builds them,
aggregates, ORDER BY with and without LIMIT, DISTINCT, MINUS, NOT EXISTS,
subqueries, CONSTRUCT) and property paths, through the real engine on the
real HDT file (LocalTransport) with a quantum small enough that every query
spans many quanta. The same results whether OPTIONAL runs as OptJoin or
BindLeftJoin. One instance of each of the 20 templates (QUANTA_DIFFERENTIAL=all: all 200)."""

from __future__ import annotations

import asyncio
import functools
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from quanta.client import Budgets, SmartClient
from quanta.client.in_process import LocalTransport
from quanta.client.ops.order import term_key
from quanta.engine.storage import open_store
from quanta.sparql.terms import nt_term
from quanta.testkit.data import shared_dir
from quanta.testkit.oracle import as_multiset, oxigraph_count, oxigraph_rows, oxigraph_solutions, oxigraph_store
from quanta.testkit.workloads import PATHS, variants

WATDIV = shared_dir() / "datasets" / "watdiv"
NTRIPLES = WATDIV / "watdiv-100k.nt.gz"
SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
ALL = sorted((WATDIV / "queries" / "basic").glob("*.rq"))
BASIC = ALL if os.environ.get("QUANTA_DIFFERENTIAL") == "all" else [q for q in ALL if q.stem.endswith("_1")]
# A 1 ms quantum and pages of 40 rows: every query spans many quanta; blocks of
# 30 mappings; 500 rows of memory: the larger sorts, groups and OptJoins spill.
QUANTUM_S = 0.001
PAGE_RESULTS = 40
BUDGETS = Budgets(block_size=30, memory_rows=500)
Row = tuple[Any, ...]  # terms (str | None) of a solution or a triple, or ASK's boolean


@functools.cache
def reference_store() -> ox.Store:
    return oxigraph_store(NTRIPLES)


def _variants() -> list[Any]:
    """Each variant the generator makes of each basic query (OPTIONAL, MINUS and NOT EXISTS need
    two triple patterns that are not a cross product: not every query has them)."""
    if not NTRIPLES.exists():
        return []  # test_every_variant_is_generated fails
    store = reference_store()
    return [
        pytest.param(name, query, id=f"{path.stem}-{name}")
        for path in BASIC
        for name, query in variants(path.read_text(), lambda p: oxigraph_count(store, p)).items()
    ]


VARIANTS = _variants()


@pytest.fixture(scope="module")
def reference() -> ox.Store:
    return reference_store()


@pytest.fixture(scope="module")
def transport() -> LocalTransport:
    return LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=QUANTUM_S,
                          max_results=PAGE_RESULTS)  # fmt: skip


async def run(transport: LocalTransport, query: str, optional: str = "server") -> tuple[str, list[str], list[Row]]:
    client = SmartClient(transport, budgets=BUDGETS, optional=optional)
    execution = await client.prepare(query, "watdiv")
    if execution.form == "ask":
        return "ask", [], [(await execution.boolean(),)]
    if execution.form == "select":
        return "select", execution.variables, [row async for row in execution.solutions()]
    return execution.form, ["s", "p", "o"], [row async for row in execution.triples()]


def check(reference: ox.Store, query: str, form: str, head: list[str], rows: list[Row]) -> None:
    if form == "ask":
        assert rows == [(oxigraph_rows(reference, query),)]
        return
    if form == "construct":
        triples = reference.query(query)
        assert isinstance(triples, ox.QueryTriples)
        expected = {tuple(str(t) for t in (q.subject, q.predicate, q.object)) for q in triples}
        assert {tuple(nt_term(t) for t in row) for row in rows} == expected
        return
    got = as_multiset(head, rows)
    if "ORDER BY" in query:
        check_order(reference, query, head, rows)
        if "LIMIT" in query:
            return  # ties at the cut may be either (the order itself is checked)
    assert got == oxigraph_solutions(reference, query)


def check_order(reference: ox.Store, query: str, head: list[str], rows: list[Row]) -> None:
    """The rows' ORDER BY keys come in pyoxigraph's sequence (ties in any order)."""
    order = query.split("ORDER BY")[1].split("LIMIT")[0].split()
    keys = [(k.removeprefix("DESC(").rstrip(")").lstrip("?"), k.startswith("DESC")) for k in order]
    positions = [(head.index(v), desc) for v, desc in keys]
    ours = [tuple(term_key(row[i]) for i, _ in positions) for row in rows]
    solutions = reference.query(query)
    assert isinstance(solutions, ox.QuerySolutions)
    theirs = [tuple(term_key(None if s[v] is None else _dictionary(s[v])) for v, _ in keys) for s in solutions]
    assert ours == theirs


def _dictionary(term: object) -> str:
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    assert isinstance(term, ox.Literal)
    if term.language:
        return f'"{term.value}"@{term.language}'
    datatype = term.datatype.value
    return f'"{term.value}"' if datatype == XSD_STRING else f'"{term.value}"^^<{datatype}>'


XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


NAMES = ["optional", "optional-filter", "distinct", "aggregates", "count", "order", "order-limit", "minus"]
NAMES += ["not-exists", "subquery", "construct"]


def test_every_variant_is_generated() -> None:
    """Without this, a generator that made fewer variants (or no WatDiv data) would test less and pass."""
    assert len(BASIC) >= 20, f"expected the WatDiv basic queries under {WATDIV}"
    names = Counter(param.values[0] for param in VARIANTS)
    assert sorted(names) == sorted(NAMES), names
    assert len(VARIANTS) >= 10 * len(BASIC), f"{len(VARIANTS)} variants of {len(BASIC)} queries (202 of 20)"


@pytest.mark.parametrize(("name", "query"), VARIANTS)
def test_variants_give_pyoxigraphs_answers(name: str, query: str, reference: ox.Store, transport) -> None:
    check(reference, query, *asyncio.run(run(transport, query)))
    if name == "optional":  # the workers' LeftJoin, OptJoin and BindLeftJoin give the same answers
        for optional in ("auto", "bind"):
            check(reference, query, *asyncio.run(run(transport, query, optional=optional)))


@pytest.mark.parametrize("name", sorted(PATHS))
def test_property_paths_give_pyoxigraphs_answers(name: str, reference: ox.Store, transport) -> None:
    query = PATHS[name]
    check(reference, query, *asyncio.run(run(transport, query)))


PRICE = "<http://purl.org/goodrelations/price>"
# ORDER BY an expression a SELECT expression binds: the sort reads that variable (one Extend or
# BIND, not two), unless a later SELECT expression binds a variable of it: there the ORDER BY sees the value,
# the SELECT expression below does not (?v unbound), and sorting on ?v would order by ?o alone.
ORDERED_BY_SELECTED = {
    "the same expression": (f"SELECT ?o ?p (?p * 2 AS ?d) WHERE {{ ?o {PRICE} ?p }} ORDER BY DESC(?p * 2) ?o", 1),
    "a variable bound above it": (
        f"SELECT ?o (STR(?w) AS ?v) (?p AS ?w) WHERE {{ ?o {PRICE} ?p }} ORDER BY DESC(STR(?w)) ?o", 3,
    ),
    "RAND": (f"SELECT ?o (RAND() AS ?r) WHERE {{ ?o {PRICE} ?p }} ORDER BY RAND() ?o LIMIT 3", 2),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ORDERED_BY_SELECTED))
def test_order_by_a_selected_expression(name: str, reference: ox.Store, transport) -> None:
    query, extends = ORDERED_BY_SELECTED[name]

    async def rows_and_plan() -> tuple[list[str], list[Row], str]:
        # the client's plan (a worker would run it whole)
        execution = await SmartClient(transport, budgets=BUDGETS, whole=False).prepare(query, "watdiv")
        return execution.variables, [row async for row in execution.solutions()], execution.plan.explain()

    head, rows, plan = asyncio.run(rows_and_plan())
    assert plan.count("Extend ") + plan.count("BIND(") == extends, plan  # in the client, or in a piece
    if name == "RAND":
        assert len(rows) == 3
        return
    solutions = reference.query(query)
    assert isinstance(solutions, ox.QuerySolutions)
    assert rows == [tuple(None if s[v] is None else _dictionary(s[v]) for v in head) for s in solutions]
