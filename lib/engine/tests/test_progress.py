"""The estimated fraction done (quanta.engine.progress) on real HDT files: exact for one scan,
non-decreasing from suspension to suspension, 1.0 at the end, near the truth on joins."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quanta.engine import progress
from quanta.engine.execute import execute, run
from quanta.engine.plan import Plan
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore
from quanta.testkit.engine import StepQuantum

W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
LIKES = f"SELECT * WHERE {{ ?s <{W}likes> ?o }}"  # 1,099 rows
CHAIN = f"SELECT * WHERE {{ ?s <{W}friendOf> ?f . ?f <{W}likes> ?o }}"  # 44,997 rows
UNION = f"SELECT * WHERE {{ {{ ?s <{W}likes> ?o }} UNION {{ ?s <{W}follows> ?o }} UNION {{ ?s <{W}friendOf> ?o }} }}"


def suspensions(store: TripleStore, query: str, steps: int) -> Iterator[tuple[float, int, Plan]]:
    """(estimate, rows so far, plan) at each suspension of `query` run `steps` steps a quantum,
    through the saved bytes as a worker does; then (the final page's progress, rows, plan)."""
    plan = compile_query(query, store)
    rows = 0
    while True:
        quantum = StepQuantum(steps)
        plan.ctx.quantum = quantum
        out, done = run(plan, quantum)
        rows += len(out)
        if done:
            return
        saved = plan.save()
        yield progress.estimate(plan), rows, plan
        plan = Plan.load(saved, store, Quantum(None))


def test_one_scan_is_exact(watdiv_store: TripleStore) -> None:
    """For one scan the estimate is its offset over the pattern's count: here, every entry read is a
    row, so it is the fraction of the rows emitted, exactly."""
    total = sum(1 for _ in watdiv_store.search(0, watdiv_store.locate(W + "likes"), 0))
    seen = list(suspensions(watdiv_store, LIKES, 97))
    assert len(seen) == total // 97 - 1 + (total % 97 > 0)
    for estimate, rows, _ in seen:
        assert estimate == rows / total


@pytest.mark.parametrize("query", [CHAIN, UNION], ids=["chain", "union"])
def test_non_decreasing_and_one_at_the_end(watdiv_store: TripleStore, query: str) -> None:
    estimates = [e for e, _, _ in suspensions(watdiv_store, query, 1500)]
    assert len(estimates) > 20
    assert all(0.0 <= e < 1.0 for e in estimates)
    assert estimates == sorted(estimates), "the estimate went back"
    assert estimates[0] < 0.1 and estimates[-1] > 0.9
    # through execute, as a worker runs it: each page's stats, 1.0 on the last one exactly
    page = execute(watdiv_store, query=query, quantum_seconds=0.002, max_results=2000)
    pages = [page.stats.progress]
    while page.next is not None:
        page = execute(watdiv_store, saved=page.next, quantum_seconds=0.002, max_results=2000)
        pages.append(page.stats.progress)
    assert pages[-1] == 1.0 and pages == sorted(pages) and all(p < 1.0 for p in pages[:-1])


def test_near_the_truth_on_a_join(watdiv_store: TripleStore) -> None:
    """A rough check against the truth: on friendOf ⋈ likes (fan-outs of 0 to a few), the estimate
    stays within 0.1 of the fraction of the rows emitted."""
    total = 44_997
    seen = list(suspensions(watdiv_store, CHAIN, 3000))
    assert max(abs(estimate - rows / total) for estimate, rows, _ in seen) < 0.1


def test_values_and_limit(make_store) -> None:
    ex = "http://example.org/"
    store = make_store("".join(f"<{ex}s{i}> <{ex}p> <{ex}o{i % 7}> .\n" for i in range(200)))
    values = f"SELECT * WHERE {{ VALUES ?o {{ {' '.join(f'<{ex}o{i}>' for i in range(7))} }} ?s <{ex}p> ?o }}"
    estimates = [e for e, _, _ in suspensions(store, values, 10)]
    assert estimates == sorted(estimates) and estimates[0] < 0.2 and estimates[-1] > 0.8
    # LIMIT: rows emitted over the limit, when that is further than the scan
    for estimate, rows, _ in suspensions(store, f"SELECT * WHERE {{ ?s <{ex}p> ?o }} LIMIT 20", 3):
        assert estimate == max(rows / 200, rows / 20)
    for estimate, rows, _ in suspensions(store, f"SELECT * WHERE {{ ?s <{ex}p> ?o }} OFFSET 10 LIMIT 20", 4):
        assert estimate == max((rows + 10) / 200, (rows + 10) / 30) or rows == 0


def test_exact_on_an_even_join(make_store) -> None:
    """Three outer entries of 100 inner ones each: the inner scan's place counts, so the estimate is
    the fraction of the rows emitted exactly, at every suspension, also inside an outer entry."""
    ex = "http://example.org/"
    lines = [f"<{ex}a> <{ex}knows> <{ex}x{i}> .\n" for i in range(3)]
    lines += [f"<{ex}x{i}> <{ex}p> <{ex}y{j}> .\n" for i in range(3) for j in range(100)]
    store = make_store("".join(lines))
    seen = list(suspensions(store, f"SELECT * WHERE {{ <{ex}a> <{ex}knows> ?x . ?x <{ex}p> ?y }}", 7))
    assert len(seen) > 30
    for estimate, rows, _ in seen:
        assert estimate == pytest.approx(rows / 300, abs=1e-12)
