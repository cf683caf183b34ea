"""A query is parsed once: the smart client parses the text it gets, and each server piece is
parsed once, by the engine at its first quantum (later quanta resume the saved plan). The engine
runs in process (LocalTransport, what a worker runs); the parser is counted where it is called."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from quanta.client import RequestEvent, SmartClient
from quanta.client.in_process import LocalTransport
from quanta.engine.storage import open_store
from quanta.native import _core

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"


def test_a_query_is_parsed_once_and_each_piece_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: Counter[str] = Counter()
    parse = _core.parse_query

    def counted(text: str, base: str | None = None) -> tuple[object, ...]:
        parsed[text] += 1
        return parse(text, base)

    monkeypatch.setattr(_core, "parse_query", counted)
    transport = LocalTransport({"watdiv": {None: open_store(str(SAMPLE), "watdiv")}}, quantum_s=0.002, max_results=500)
    requests: list[RequestEvent] = []
    query = (
        f"SELECT ?s (COUNT(?p) AS ?n) WHERE {{ ?s <{WSDBM}friendOf> ?o "
        f"OPTIONAL {{ ?o <{WSDBM}likes> ?p }} }} GROUP BY ?s"
    )

    async def run() -> int:
        execution = await SmartClient(transport, on_request=requests.append).prepare(query, "watdiv")
        return len([row async for row in execution.solutions()])

    assert asyncio.run(run()) > 0
    assert parsed[query] == 1, "the query's own text"
    pieces = {text: n for text, n in parsed.items() if text != query}
    assert pieces and all(n == 1 for n in pieces.values()), [n for n in pieces.values() if n > 1][:5]
    assert len(requests) > len(pieces), "pieces resumed over several quanta, never parsed again"
