"""The W3C SPARQL 1.0 / 1.1 query-evaluation tests through the smart client,
over the real engine on real HDT files (LocalTransport: a quantum of every
server piece suspended after each 2 results or 0.2 ms, resumed from its
saved plan). Every test runs but those in `skips.CLIENT_SKIPS`, each with its
reason. SERVICE tests reach their endpoints (smart clients over their own
data) through the client's allowlist.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make the helpers importable

from harness import CASES, EXPECTED_CASES, ROOT, Files, check_graph, check_select, graph_of, query_text, read_graph
from manifest import Case, read_results
from skips import CLIENT_SKIPS, VALUE_COMPARED

from quanta.client import Budgets, SmartClient, SmartClientEndpoint
from quanta.client.in_process import LocalTransport
from quanta.client.services import ServiceEndpoint
from quanta.engine.storage import open_store

QUANTUM_S = 0.0002
PAGE_RESULTS = 2
# small blocks and budgets: bind joins ship several blocks, sorts and groups spill
BUDGETS = Budgets(block_size=3, memory_rows=4)


def _params() -> list[object]:
    out: list[object] = []
    for case in CASES:
        marks = [pytest.mark.skip(reason=CLIENT_SKIPS[case.id])] if case.id in CLIENT_SKIPS else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("w3c-client"), open_store)


def client(case: Case, files: Files) -> SmartClient:
    transport = LocalTransport({"test": files.graphs(case)}, quantum_s=QUANTUM_S, max_results=PAGE_RESULTS)
    services: dict[str, ServiceEndpoint] = {}
    remotes: list[SmartClient] = []
    for iri, data in case.services:
        remote = LocalTransport({"remote": {None: files.store(data)}}, quantum_s=QUANTUM_S, max_results=PAGE_RESULTS)
        remotes.append(SmartClient(remote, budgets=BUDGETS))
        services[iri] = SmartClientEndpoint(remotes[-1], "remote")
    for smart in remotes:  # each endpoint may call the others (nested SERVICE)
        smart.services.update(services)
    return SmartClient(transport, budgets=BUDGETS, services=services)


@dataclass
class Answer:
    form: str
    head: list[str] = field(default_factory=list)
    rows: list[tuple[str | None, ...]] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    boolean: bool | None = None


async def answer(smart: SmartClient, text: str) -> Answer:
    execution = await smart.prepare(text, "test")
    if execution.form == "ask":
        return Answer("ask", boolean=await execution.boolean())
    if execution.form == "select":
        return Answer("select", execution.variables, [row async for row in execution.solutions()])
    return Answer(execution.form, triples=[triple async for triple in execution.triples()])


@pytest.mark.parametrize("case", _params())
def test_through_the_client(case: Case, files: Files) -> None:
    assert case.result is not None
    got = asyncio.run(answer(client(case, files), query_text(case)))
    if got.form in ("construct", "describe"):
        check_graph(read_graph(case.result), graph_of(got.triples))
        return
    expected = read_results(case.result)
    if expected.boolean is not None:
        assert got.form == "ask", "expected an ASK answer"
        assert got.boolean == expected.boolean
        return
    check_select(expected, got.head, got.rows, value_compared=case.id in VALUE_COMPARED)


def test_suites_found() -> None:
    assert len(CASES) >= EXPECTED_CASES, f"expected the W3C query-evaluation tests under {ROOT}, found {len(CASES)}"
