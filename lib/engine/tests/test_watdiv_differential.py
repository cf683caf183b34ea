"""The 200 WatDiv basic queries on the 100K dataset, suspended constantly,
give exactly the multisets pyoxigraph gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from quanta.testkit.data import shared_dir
from quanta.testkit.engine import run_paged
from quanta.testkit.oracle import as_multiset, oxigraph_rows

WATDIV = shared_dir() / "datasets" / "watdiv"
QUERIES = sorted((WATDIV / "queries" / "basic").glob("*.rq"))


@pytest.mark.parametrize("path", QUERIES, ids=[p.stem for p in QUERIES])
def test_basic_query_suspended_every_few_results(path: Path, watdiv_store, watdiv_oxigraph) -> None:
    query = path.read_text()
    expected = oxigraph_rows(watdiv_oxigraph, query)
    # a 0.2 ms quantum, and never more than 3 results a page: every query with
    # more than a handful of results is suspended and resumed from bytes
    head, rows, _, quanta = run_paged(watdiv_store, query, quantum_seconds=0.0002, max_results=3)
    assert as_multiset(head, rows) == expected
    assert quanta >= len(rows) // 3


def test_queries_found() -> None:
    assert len(QUERIES) == 200, f"expected the 200 WatDiv basic queries under {WATDIV}"
