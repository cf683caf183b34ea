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
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make the helpers importable

from harness import MANIFESTS, ROOT, Files, check_graph, check_select, query_text
from manifest import Case, load_cases, read_results
from skips import CLIENT_SKIPS, VALUE_COMPARED

from quanta.client import Budgets, SmartClient, SmartClientEndpoint
from quanta.client.local import LocalTransport
from quanta.client.services import ServiceEndpoint
from quanta.engine.storage import open_store

QUANTUM_S = 0.0002
PAGE_RESULTS = 2
# small blocks and budgets: bind joins ship several blocks, sorts and groups spill
BUDGETS = Budgets(block_size=3, memory_rows=4)

CASES: list[Case] = load_cases(ROOT, MANIFESTS) if ROOT.exists() else []


def _params() -> list[object]:
    out: list[object] = []
    for case in CASES:
        marks = [pytest.mark.skip(reason=CLIENT_SKIPS[case.id])] if case.id in CLIENT_SKIPS else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("w3c-client"), lambda path, name: open_store(path, name))


def client(case: Case, text: str, files: Files) -> SmartClient:
    transport = LocalTransport({"test": files.graphs(case, text)}, quantum_s=QUANTUM_S, max_results=PAGE_RESULTS)
    services: dict[str, ServiceEndpoint] = {}
    for iri, data in case.services:
        remote = LocalTransport({"remote": {None: files.store(data)}}, quantum_s=QUANTUM_S, max_results=PAGE_RESULTS)
        services[iri] = SmartClientEndpoint(SmartClient(remote, budgets=BUDGETS), "remote")
    return SmartClient(transport, budgets=BUDGETS, services=services)


async def answer(smart: SmartClient, text: str) -> tuple[str, list[str], list[tuple[str | None, ...]], bool | None]:
    execution = await smart.prepare(text, "test")
    if execution.form == "ask":
        return "ask", [], [], await execution.boolean()
    if execution.form == "select":
        rows = [row async for row in execution.solutions()]
    else:
        rows = [triple async for triple in execution.triples()]
    return execution.form, execution.variables, rows, None


@pytest.mark.parametrize("case", _params())
def test_through_the_client(case: Case, files: Files) -> None:
    assert case.result is not None
    text = query_text(case)
    form, head, rows, boolean = asyncio.run(answer(client(case, text, files), text))
    if form in ("construct", "describe"):
        check_graph(case.result, rows)  # type: ignore[arg-type]
        return
    expected = read_results(case.result)
    if expected.boolean is not None:
        assert form == "ask", "expected an ASK answer"
        assert boolean == expected.boolean
        return
    check_select(expected, head, rows, value_compared=case.id in VALUE_COMPARED)


def test_suites_found() -> None:
    assert len(CASES) >= 520, f"expected the W3C query-evaluation tests under {ROOT}, found {len(CASES)}"
