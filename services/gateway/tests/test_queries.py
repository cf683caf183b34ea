"""POST /v1/datasets/{name}/query through real HTTP, real Redis and an in-test consumer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from quanta.gateway.v1.tokens import Kind, Signer, Token
from quanta.queue.v1 import queue_pb2
from quanta.testkit.gateway import Consumer, follow, paging_handler, problem

QUERY = "SELECT ?x WHERE { ?x ?p ?o }"


def test_pages_by_value_until_complete(settings, serve, consumer) -> None:
    worker: Consumer = consumer(paging_handler(pages=3, rows=2))
    client = serve(settings())
    pages = follow(client, "watdiv", {"query": QUERY})
    assert len(pages) == 3
    values = [b["x"]["value"] for p in pages for b in p["results"]["bindings"]]
    assert values == ["1.0", "1.1", "2.0", "2.1", "3.0", "3.1"]
    assert all(p["head"] == {"vars": ["x"]} for p in pages)
    assert pages[-1]["next"] is None
    stats = pages[0]["stats"]
    for field in ("queue_wait_ms", "quantum_ms", "resume_ms", "suspend_ms", "plan_bytes", "worker", "parse_ms"):
        assert field in stats
    assert stats["worker"] == "test-worker" and stats["plan"] == "value" and stats["results"] == 2
    assert pages[-1]["stats"]["plan"] is None
    first, second, _ = worker.tasks
    assert first.query == QUERY and first.dataset == "watdiv" and first.plan_mode == queue_pb2.PLAN_MODE_AUTO
    assert second.plan == b"plan:1"
    assert first.reply_to.startswith("quanta:reply:") and first.enqueued_at > 0


def test_bindings_are_spliced_byte_for_byte(settings, serve, consumer) -> None:
    odd = b'[ {"x" : {"type":"literal","value":"a\\u00e9\\"b"}} ]'

    def handle(task: queue_pb2.Task) -> queue_pb2.Reply:
        return queue_pb2.Reply(id=task.id, page=queue_pb2.Page(head=["x"], bindings_json=odd, results=1))

    consumer(handle)
    response = serve(settings()).post("/v1/datasets/watdiv/query", json={"query": QUERY})
    assert response.headers["content-type"] == "application/json"
    assert b'"bindings":' + odd + b"}" in response.content
    assert response.json()["results"]["bindings"][0]["x"]["value"] == 'aé"b'


def test_empty_select_page(settings, serve, consumer) -> None:
    consumer(lambda task: queue_pb2.Reply(id=task.id, page=queue_pb2.Page(head=["a", "b"])))
    body = serve(settings()).post("/v1/datasets/watdiv/query", json={"query": QUERY}).json()
    assert body["head"] == {"vars": ["a", "b"]} and body["results"] == {"bindings": []} and body["next"] is None


def test_ask_pages(settings, serve, consumer) -> None:
    def handle(task: queue_pb2.Task) -> queue_pb2.Reply:
        page = queue_pb2.Page(ask=True)
        if task.WhichOneof("input") == "query":
            page.plan = b"ask-state"
        else:
            page.boolean = True
        return queue_pb2.Reply(id=task.id, page=page)

    consumer(handle)
    first, last = follow(serve(settings()), "watdiv", {"query": "ASK { ?s ?p ?o }"})
    assert first["head"] == {} and first["results"] == {"bindings": []} and first["next"]
    assert last == {"head": {}, "boolean": True, "next": None, "stats": last["stats"]}


def test_pages_by_reference_and_sticky_mode(settings, serve, consumer) -> None:
    worker = consumer(paging_handler(pages=3))
    pages = follow(serve(settings()), "watdiv", {"query": QUERY, "plan": "reference"})
    assert [p["stats"]["plan"] for p in pages] == ["reference", "reference", None]
    first, second, third = worker.tasks
    assert [t.plan_mode for t in worker.tasks] == [queue_pb2.PLAN_MODE_REFERENCE] * 3
    assert second.plan_ref == f"{first.id}-1" and third.plan_ref == f"{second.id}-2"


def test_request_overrides_mode_and_dataset_default(settings, serve, consumer) -> None:
    worker = consumer(paging_handler(pages=2))
    client = serve(settings())
    first = client.post("/v1/datasets/other/query", json={"query": QUERY}).json()  # catalog: reference
    client.post("/v1/datasets/other/query", json={"next": first["next"], "plan": "value"})
    client.post("/v1/datasets/watdiv/query", json={"query": QUERY, "plan": "value"})
    modes = [t.plan_mode for t in worker.tasks]
    assert modes == [queue_pb2.PLAN_MODE_REFERENCE, queue_pb2.PLAN_MODE_VALUE, queue_pb2.PLAN_MODE_VALUE]


@pytest.mark.parametrize(
    ("error", "status", "slug", "members"),
    [
        (queue_pb2.Error(kind="syntax-error", message="unexpected '}'", line=3, column=14), 400, "syntax-error",
         {"line": 3, "column": 14}),
        (queue_pb2.Error(kind="unsupported-operator", message="MINUS ...", operator="MINUS"), 422,
         "unsupported-operator", {"operator": "MINUS"}),
        (queue_pb2.Error(kind="plan-expired", message="gone"), 410, "plan-expired", {}),
        (queue_pb2.Error(kind="dataset-mismatch", message="other build"), 409, "dataset-mismatch", {}),
        (queue_pb2.Error(kind="invalid-plan", message="bad state"), 400, "invalid-plan", {}),
        (queue_pb2.Error(kind="unknown-dataset", message="not served"), 404, "unknown-dataset", {}),
        (queue_pb2.Error(kind="dead-letter", message="stopped 2 workers"), 422, "dead-letter", {}),
        (queue_pb2.Error(kind="internal", message="Traceback: secret"), 500, "internal", {}),
        (queue_pb2.Error(kind="something-new"), 500, "internal", {}),
    ],
)  # fmt: skip
def test_worker_errors(settings, serve, consumer, error, status, slug, members) -> None:
    consumer(lambda task: queue_pb2.Reply(id=task.id, error=error))
    response = serve(settings()).post("/v1/datasets/watdiv/query", json={"query": QUERY})
    body = problem(response, status, slug)
    assert body.items() >= members.items()
    assert body["instance"] == "/v1/datasets/watdiv/query" and body["request_id"]
    assert "secret" not in response.text


def test_unknown_dataset(settings, serve) -> None:
    body = problem(serve(settings()).post("/v1/datasets/nope/query", json={"query": QUERY}), 404, "unknown-dataset")
    assert "nope" in body["detail"]


def test_forged_and_altered_tokens(settings, serve, consumer) -> None:
    worker = consumer()
    client = serve(settings())
    token = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).json()["next"]
    forged = Signer([("k1", b"not the server's secret........")]).sign(Token(Kind.VALUE, "watdiv", b"plan:1"))
    altered = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    for bad in (forged, altered, "garbage", token + "A"):
        problem(client.post("/v1/datasets/watdiv/query", json={"next": bad}), 400, "invalid-token")
    assert len(worker.tasks) == 1  # nothing unverified reached a worker


def test_token_for_another_dataset(settings, serve, consumer) -> None:
    consumer()
    client = serve(settings())
    token = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}).json()["next"]
    problem(client.post("/v1/datasets/other/query", json={"next": token}), 409, "dataset-mismatch")


def test_rotated_secret_keeps_tokens_valid(settings, serve, consumer) -> None:
    consumer()
    old = serve(settings(secret_keys="k1:0123456789abcdef0123456789abcdef"))
    token = old.post("/v1/datasets/watdiv/query", json={"query": QUERY}).json()["next"]
    new = serve(settings(secret_keys="k2:fedcba9876543210fedcba9876543210,k1:0123456789abcdef0123456789abcdef"))
    assert new.post("/v1/datasets/watdiv/query", json={"next": token}).status_code == 200
    dropped = serve(settings(secret_keys="k3:fedcba9876543210fedcba9876543210"))
    problem(dropped.post("/v1/datasets/watdiv/query", json={"next": token}), 400, "invalid-token")


@pytest.mark.parametrize(
    "payload",
    [{}, {"query": QUERY, "next": "x"}, {"query": 3}, {"query": QUERY, "plan": "sometimes"}, {"query": QUERY, "x": 1}],
)
def test_invalid_requests(settings, serve, payload) -> None:
    body = problem(serve(settings()).post("/v1/datasets/watdiv/query", json=payload), 400, "invalid-request")
    assert body["errors"]


def test_malformed_json(settings, serve) -> None:
    response = serve(settings()).post(
        "/v1/datasets/watdiv/query", content=b'{"query": ', headers={"content-type": "application/json"}
    )
    problem(response, 400, "invalid-request")


def test_body_too_large(settings, serve) -> None:
    client = serve(settings(max_body_bytes=1000))
    problem(client.post("/v1/datasets/watdiv/query", json={"query": "x" * 2000}), 413, "body-too-large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while the body arrives
        yield b'{"query": "'
        for _ in range(10):
            yield b"x" * 200
        yield b'"}'

    problem(client.post("/v1/datasets/watdiv/query", content=chunks()), 413, "body-too-large")


def test_query_too_long(settings, serve) -> None:
    body = problem(
        serve(settings(max_query_chars=100)).post("/v1/datasets/watdiv/query", json={"query": "é" * 101}),
        413, "query-too-long",
    )  # fmt: skip
    assert "100" in body["detail"]


def test_request_id_echoed(settings, serve, consumer) -> None:
    consumer()
    client = serve(settings())
    response = client.post("/v1/datasets/watdiv/query", json={"query": QUERY}, headers={"x-request-id": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    generated = client.post("/v1/datasets/nope/query", json={"query": QUERY}, headers={"x-request-id": "bad id"})
    assert generated.headers["x-request-id"] == generated.json()["request_id"] != "bad id"


def test_unknown_route_is_a_problem(settings, serve) -> None:
    response = serve(settings()).get("/v2/nothing")
    assert response.status_code == 404 and response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"] == "about:blank"
    assert json.loads(response.content)["status"] == 404
