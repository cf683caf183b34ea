"""Native execution of whole plans (`operators.native.NativeTree`): suspended
after any number of steps and resumed, the rows of the uninterrupted run, in
order; pages that end inside a batch; rows handed over as one buffer."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from quanta.engine.execute import decode, edge, run
from quanta.engine.operators.native import NativeTree
from quanta.engine.plan import Plan
from quanta.engine.planning.compile import compile_query
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore, open_store
from quanta.testkit.data import write_hdt
from quanta.testkit.engine import CountingQuantum, StepQuantum


def _sibling(name: str) -> ModuleType:
    """A sibling test module (importlib mode puts no test folder on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"_native_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_anywhere = _sibling("test_suspend_anywhere")
P, QUERIES = _anywhere.P, _anywhere.QUERIES
W = "http://db.uwaterloo.ca/~galuc/wsdbm/"
WATDIV = {
    "friendOf/likes": f"SELECT * WHERE {{ ?u <{W}friendOf> ?f . ?f <{W}likes> ?p }} LIMIT 4000",
    "star, merge": f"SELECT * WHERE {{ ?s <{W}likes> ?p . ?s <{W}friendOf> ?f . ?s <{W}follows> ?g }} LIMIT 3000",
    "path and filter": f"SELECT * WHERE {{ ?a <{W}follows> ?b . ?b <{W}likes> ?p FILTER(?a != ?b) }} LIMIT 3000",
    "filters between joins": (
        f"SELECT * WHERE {{ ?a <{W}follows> ?b . ?b <{W}follows> ?c . ?c <{W}likes> ?p "
        f"FILTER(?a != ?c) FILTER(!sameTerm(?b, <{W}User0>)) FILTER(?p != <{W}Product0>) }} LIMIT 2000"
    ),
    "union in join": (
        f"SELECT * WHERE {{ ?u <{W}friendOf> ?f . {{ ?f <{W}likes> ?p }} UNION {{ ?f <{W}follows> ?p }} "
        f"FILTER(?p != <{W}User0>) }} LIMIT 3000"
    ),
    "equal to a constant": (
        f"SELECT * WHERE {{ ?a <{W}follows> ?b . ?b <{W}likes> ?p FILTER(?b = <{W}User10>) }} LIMIT 500"
    ),
}
FILTERED = ("path and filter", "filters between joins", "equal to a constant")


def suspended(store: TripleStore, query: str, steps: int) -> tuple[list[tuple[str | None, ...]], bytes | None]:
    plan = compile_query(query, store)
    quantum = StepQuantum(steps)
    plan.ctx.quantum = quantum
    rows, done = run(plan, quantum)
    return decode(plan, rows), None if done else plan.save()


def total_steps(store: TripleStore, query: str) -> int:
    plan = compile_query(query, store)
    quantum = CountingQuantum()
    plan.ctx.quantum = quantum
    assert run(plan, quantum)[1]
    return quantum.taken()


def uninterrupted(store: TripleStore, query: str) -> list[tuple[str | None, ...]]:
    plan = compile_query(query, store)
    plan.ctx.quantum = quantum = Quantum(None)
    rows, done = run(plan, quantum)
    assert done
    return decode(plan, rows)


def compare(store: TripleStore, query: str, every: int = 1) -> None:
    """Suspended after every `every` steps, saved, and resumed from the bytes to the
    end: the rows of the uninterrupted run, in the same order (Resume(Suspend(P)) = P)."""
    reference = uninterrupted(store, query)
    steps = total_steps(store, query)
    for n in range(0, steps + 1, every):
        rows, saved = suspended(store, query, n)
        if saved is not None:
            plan = Plan.load(saved, store, Quantum(None))
            rest, done = run(plan, plan.ctx.quantum)
            assert done
            rows += decode(plan, rest)
        assert rows == reference, f"suspended after {n} of {steps} steps"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, small_graph: str) -> TripleStore:
    return open_store(str(write_hdt(small_graph, tmp_path_factory.mktemp("native"))), name="small")


@pytest.mark.parametrize("name", FILTERED)
def test_simple_filters_run_natively(watdiv_copy: Path, name: str) -> None:
    store = open_store(str(watdiv_copy), name="watdiv-100k")
    plan = compile_query(WATDIV[name], store)
    assert isinstance(plan.root, NativeTree)
    assert any(type(op).__name__ == "Filter" for op in _walk(plan.root.operator))
    plan.ctx.quantum = quantum = Quantum(None)
    assert run(plan, quantum)[1] and plan.root.pipeline.undecided == 0, "no row goes to the Python test"


def _walk(op: object) -> Iterator[object]:
    yield op
    for attr in ("input", "left", "right"):
        if hasattr(op, attr):
            yield from _walk(getattr(op, attr))
    for branch in getattr(op, "branches", []):
        yield from _walk(branch)


@pytest.mark.parametrize("name", QUERIES)
def test_every_plan_runs_natively(small: TripleStore, name: str) -> None:
    """Scans, joins, UNION, VALUES, OFFSET/LIMIT, FILTER and BIND, nested as the planner
    nests them: the whole plan is one native tree, no Python operator iterates."""
    assert isinstance(compile_query(P + QUERIES[name], small).root, NativeTree)


@pytest.mark.parametrize("name", QUERIES)
def test_native_plan_resumes_after_every_step(small: TripleStore, name: str) -> None:
    compare(small, P + QUERIES[name])


@pytest.mark.parametrize("name", WATDIV)
def test_native_plan_on_watdiv(watdiv_copy: Path, name: str) -> None:
    store = open_store(str(watdiv_copy), name="watdiv-100k")
    query = WATDIV[name]
    steps = total_steps(store, query)
    compare(store, query, every=max(1, steps // 150))


def test_a_page_cut_inside_a_batch_resumes_exactly(watdiv_copy: Path) -> None:
    """Pages of 7 rows end inside the native batches: the saved state is the
    one after the 7th row (rewound and replayed), and resuming loses nothing."""
    store = open_store(str(watdiv_copy), name="watdiv-100k")
    query = WATDIV["friendOf/likes"]
    plan = compile_query(query, store)
    quantum = Quantum(None)
    plan.ctx.quantum = quantum
    everything = decode(plan, run(plan, quantum)[0])
    rows: list[tuple[str | None, ...]] = []
    saved = None
    while True:
        quantum = Quantum(None)
        if saved is None:
            plan = compile_query(query, store)
            plan.ctx.quantum = quantum
        else:
            plan = Plan.load(saved, store, quantum)
        got, done = run(plan, quantum, max_results=7)
        rows += decode(plan, got)
        if done:
            break
        saved = plan.save()
    assert rows == everything


def test_a_native_plan_hands_its_page_over_as_one_buffer(watdiv_copy: Path) -> None:
    """No Python object per row: a native plan's page is a buffer of ids, which reads as
    tuples (length, index, slice, iteration) and is written and decoded as those tuples are."""
    store = open_store(str(watdiv_copy), name="watdiv-100k")
    query = f"SELECT * WHERE {{ ?s <{W}likes> ?p . ?s <{W}friendOf> ?f }}"
    plan = compile_query(query, store)
    plan.ctx.quantum = quantum = Quantum(None)
    rows, done = run(plan, quantum, max_results=3000)
    assert not done and not isinstance(rows, list)
    expected = [tuple(row) for row in rows]
    assert len(expected) == len(rows) == 3000 and len(set(expected)) == 3000
    assert all(len(row) == plan.ctx.width and all(row) for row in expected)
    assert rows[-1] == expected[-1] and rows[5] == expected[5]
    assert list(rows[10:20]) == expected[10:20] and len(rows[2990:5000]) == 10
    _, decoder, renderer = edge(plan)
    assert renderer("json", rows) == renderer("json", expected)
    assert decoder(rows) == decoder(expected)
    with pytest.raises(IndexError):
        rows[3000]


def test_computed_binds_over_watdiv_are_the_python_functions(
    watdiv_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strings, integers and doubles a BIND computes over every kind of object of watdiv,
    minted natively (no row goes to the Python function), are the terms and ids the Python
    functions give them: the same rows, and suspended and resumed, the same rows."""
    from quanta.engine.operators import expression as expression_ops

    store = open_store(str(watdiv_copy), name="watdiv-100k")
    xsd = "http://www.w3.org/2001/XMLSchema#"
    binds = (
        f'BIND(CONCAT(STR(?o), "x") AS ?b) BIND(<{xsd}integer>(?o) + 1 AS ?n) '
        f"BIND(STRLEN(STR(?o)) / 7e0 AS ?d) FILTER(!sameTerm(?b, ?o))"
    )
    query = f"SELECT ?o ?b ?n ?d WHERE {{ ?s ?p ?o {binds} }} LIMIT 20000"
    plan = compile_query(query, store)
    plan.ctx.quantum = quantum = Quantum(None)
    rows, done = run(plan, quantum)
    assert done and isinstance(plan.root, NativeTree) and plan.root.pipeline.undecided == 0
    native = decode(plan, rows)
    with monkeypatch.context() as m:  # every value by the Python function
        m.setattr(expression_ops, "split_condition", lambda op: None)
        m.setattr(expression_ops, "native_condition", lambda e, ctx: None)
        reference = uninterrupted(store, query)
    assert native == reference and len(native) == 20000
    assert sum(n is not None for _, _, n, _ in native) > 100
    compare(store, query, every=total_steps(store, query) // 5)
