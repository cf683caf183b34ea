"""Named graphs: a task names one (`Task.graph`), the worker runs it on that
graph's own file, and a plan saved on one graph resumes on no other."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import redis

from quanta.queue.v1 import queue_pb2 as q
from quanta.sparql import term_rows
from quanta.testkit.data import write_hdt

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
SMALL = "http://example.org/small"
ALL = "SELECT ?s ?o WHERE { ?s <http://example.org/p> ?o }"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    shutil.copy(SAMPLE, tmp_path / "watdiv-100k.hdt")
    triples = "".join(
        f"<http://example.org/s{i}> <http://example.org/p> <http://example.org/o{i}> .\n" for i in range(5)
    )
    write_hdt(triples, tmp_path, "small")
    path = tmp_path / "catalog.toml"
    path.write_text(
        '[datasets.watdiv]\npath = "watdiv-100k.hdt"\nquantum_ms = 5\nmax_results = 2\n'
        f'[datasets.watdiv.graphs]\n"{SMALL}" = "small.hdt"\n'
    )
    return path


def rows(reply: q.Reply) -> list[tuple[str | None, ...]]:
    page = reply.page
    return term_rows.decode(page.rows.terms, page.rows.cells, len(page.head), page.results)


def test_a_task_runs_on_the_graph_it_names(server, start_worker, submit) -> None:
    start_worker()
    client = redis.Redis.from_url(server.url)
    task = q.Task(dataset="watdiv", graph=SMALL, query=ALL, rows=q.ROW_FORMAT_TERMS, plan_mode=q.PLAN_MODE_VALUE)
    reply = submit(client, task)
    found = rows(reply)
    while reply.page.WhichOneof("next"):
        reply = submit(client, q.Task(dataset="watdiv", graph=SMALL, plan=reply.page.plan, rows=q.ROW_FORMAT_TERMS))
        found += rows(reply)
    assert sorted(found) == [(f"http://example.org/s{i}", f"http://example.org/o{i}") for i in range(5)]
    default = submit(client, q.Task(dataset="watdiv", query=ALL, rows=q.ROW_FORMAT_TERMS))
    assert rows(default) == [] and not default.page.WhichOneof("next"), "the default graph has none of them"


def test_an_unknown_graph_and_a_plan_from_another_graph_are_refused(server, start_worker, submit) -> None:
    start_worker()
    client = redis.Redis.from_url(server.url)
    unknown = submit(client, q.Task(dataset="watdiv", graph="http://example.org/none", query=ALL))
    assert unknown.error.kind == "unknown-graph"
    first = submit(client, q.Task(dataset="watdiv", graph=SMALL, query=ALL, plan_mode=q.PLAN_MODE_VALUE))
    assert first.page.WhichOneof("next") == "plan"
    elsewhere = submit(client, q.Task(dataset="watdiv", plan=first.page.plan))
    assert elsewhere.error.kind == "dataset-mismatch"
