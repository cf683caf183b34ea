"""The `/v1` HTTP client over real HTTP, against a scripted server. HttpTransport and the
Requester: pages read into terms, problems as error kinds, the graph member, retries
(bounded, Retry-After, a reply timeout's `next`), and the on_request hook. QuantaClient,
over the same transport and retry policy: it follows `next`, waits out Retry-After,
resumes from a 504's `next`, reports problems, and goes through the environment's proxy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from quanta.client import HttpTransport, QuantaClient, QueryError, RequestEvent, Retry, ServiceError, SubRequest
from quanta.client.requester import Requester
from quanta.common.redis_server import free_port
from quanta.sparql.errors import ErrorKind
from quanta.testkit.client import Answer, Script

FAST = Retry(attempts=3, base_s=0.01, max_s=0.05, unreachable_attempts=2)


def page(values: list[str], next_token: str | None) -> Answer:
    bindings = [{"x": {"type": "literal", "value": v, "xml:lang": "EN"}} for v in values]
    body = {
        "head": {"vars": ["x", "y"]},
        "results": {"bindings": bindings},
        "next": next_token,
        "stats": {"results": 1},
    }
    return 200, body, {}


def problem(slug: str, status: int, **members: Any) -> Answer:
    return status, {"type": f"https://quanta.dev/problems/{slug}", "title": slug, "status": status, **members}, {}


def test_a_page_is_read_into_terms(scripted: Script) -> None:
    server = scripted(page(["a"], "t1"), page([], None))
    transport = HttpTransport(server.url)
    first = asyncio.run(transport.run(SubRequest("d", "http://example.org/g", "SELECT ...")))
    assert first.variables == ["x", "y"] and first.rows == [('"a"@en', None)] and first.next == "t1"
    assert first.bytes > 0 and first.stats == {"results": 1}
    asyncio.run(transport.run(SubRequest("d", "http://example.org/g", next="t1")))
    assert server.bodies == [
        {"query": "SELECT ...", "graph": "http://example.org/g"},
        {"next": "t1", "graph": "http://example.org/g"},
    ]
    assert server.paths == ["/v1/datasets/d/query"] * 2


def test_problems_become_error_kinds_with_their_members(scripted: Script) -> None:
    server = scripted(
        problem("syntax-error", 400, line=3, column=7, detail="Expected SelectQuery"),
        problem("unsupported-operator", 422, operator="MINUS"),
        problem("reply-timeout", 504, next="resume", retry_after=1),
    )
    transport = HttpTransport(server.url)
    errors = []
    for _ in range(3):
        with pytest.raises(QueryError) as raised:
            asyncio.run(transport.run(SubRequest("d", query="Q")))
        errors.append(raised.value)
    assert (errors[0].kind, errors[0].line, errors[0].column) == (ErrorKind.SYNTAX_ERROR, 3, 7)
    assert (errors[1].kind, errors[1].operator) == (ErrorKind.UNSUPPORTED_OPERATOR, "MINUS")
    assert (errors[2].kind, errors[2].next, errors[2].retry_after_s) == (ErrorKind.REPLY_TIMEOUT, "resume", 1.0)


def test_retryable_failures_are_retried_and_each_request_is_reported(scripted: Script) -> None:
    server = scripted(
        problem("rate-limited", 429, retry_after=0.05),
        problem("queue-full", 503),
        problem("reply-timeout", 504, next="resume"),
        page(["a"], None),
    )
    events: list[RequestEvent] = []
    requester = Requester(HttpTransport(server.url), name="L1", on_request=events.append, retry=FAST)
    got = asyncio.run(requester.page(SubRequest("d", query="Q")))
    assert got.rows == [('"a"@en', None)]
    assert [e.status for e in events] == ["rate-limited", "queue-full", "reply-timeout", "ok"]
    assert {e.name for e in events} == {"L1"} and events[-1].bytes > 0 and events[-1].elapsed_s > 0
    assert server.bodies == [{"query": "Q"}, {"query": "Q"}, {"query": "Q"}, {"next": "resume"}]
    assert requester.requests == 4


def test_retries_are_bounded_then_the_failure_is_raised(scripted: Script) -> None:
    server = scripted(*[problem("queue-full", 503)] * 4)
    requester = Requester(HttpTransport(server.url), retry=FAST)
    with pytest.raises(QueryError) as raised:
        asyncio.run(requester.page(SubRequest("d", query="Q")))
    assert raised.value.kind is ErrorKind.QUEUE_FULL and len(server.bodies) == 4


def test_an_unreachable_service_is_retried_briefly_then_reported() -> None:
    requester = Requester(HttpTransport(f"http://127.0.0.1:{free_port()}"), retry=FAST)
    with pytest.raises(QueryError) as raised:
        asyncio.run(requester.page(SubRequest("d", query="Q")))
    assert raised.value.kind is ErrorKind.UNREACHABLE and requester.requests == 3


def test_named_graphs_come_from_the_dataset_list(scripted: Script) -> None:
    datasets = {"datasets": [{"name": "d", "graphs": ["http://example.org/g1"]}, {"name": "e", "graphs": []}]}
    server = scripted((200, datasets, {}), (200, datasets, {}))
    transport = HttpTransport(server.url)
    assert asyncio.run(transport.named_graphs("d")) == ["http://example.org/g1"]
    with pytest.raises(QueryError) as raised:
        asyncio.run(transport.named_graphs("f"))
    assert raised.value.kind is ErrorKind.UNKNOWN_DATASET


def test_quanta_client_follows_next_until_null(scripted: Script) -> None:
    server = scripted(page(["a"], "t1"), page(["b", "c"], "t2"), page([], None))
    with QuantaClient(server.url) as client:
        values = [b["x"]["value"] for b in client.query("d", "SELECT ...", plan="reference")]
    assert values == ["a", "b", "c"]
    assert server.bodies == [
        {"query": "SELECT ...", "plan": "reference"},
        {"next": "t1", "plan": "reference"},
        {"next": "t2", "plan": "reference"},
    ]


def test_quanta_client_waits_out_retry_after_then_retries_the_same_request(scripted: Script) -> None:
    busy = (503, {"type": "https://quanta.dev/problems/queue-full", "title": "full"}, {"Retry-After": "1"})
    server = scripted(busy, page(["a"], None))
    with QuantaClient(server.url) as client:
        assert [b["x"]["value"] for b in client.query("d", "Q")] == ["a"]
        assert client.requests == 2
    assert server.bodies == [{"query": "Q"}, {"query": "Q"}]
    assert server.times[1] - server.times[0] >= 0.95


def test_quanta_client_resumes_from_a_reply_timeouts_next_after_its_retry_after(scripted: Script) -> None:
    timeout = (504, {"title": "no reply", "next": "resume-here"}, {"Retry-After": "1"})
    server = scripted(page(["a"], "t1"), timeout, page(["b"], None))
    with QuantaClient(server.url) as client:
        assert [b["x"]["value"] for b in client.query("d", "Q")] == ["a", "b"]
    assert server.bodies[1:] == [{"next": "t1"}, {"next": "resume-here"}]
    assert server.times[2] - server.times[1] >= 0.95


def test_quanta_client_raises_a_problem_with_its_body(scripted: Script) -> None:
    problem = {"type": "https://quanta.dev/problems/syntax-error", "title": "Syntax error", "line": 1, "column": 8}
    server = scripted((400, problem, {"Content-Type": "application/problem+json"}))
    with QuantaClient(server.url) as client, pytest.raises(ServiceError) as raised:
        list(client.query("d", "SELECT ?"))
    assert raised.value.status == 400 and raised.value.problem == problem
    assert (raised.value.kind, raised.value.line, raised.value.column) == (ErrorKind.SYNTAX_ERROR, 1, 8)


def test_quanta_client_gives_up_after_max_retries(scripted: Script) -> None:
    server = scripted(*[problem("queue-full", 503, retry_after=0.01)] * 3)
    with QuantaClient(server.url, max_retries=2) as client, pytest.raises(ServiceError) as raised:
        list(client.query("d", "Q"))
    assert raised.value.kind is ErrorKind.QUEUE_FULL and len(server.bodies) == 3


def test_quanta_client_gives_up_on_an_unreachable_service() -> None:
    with QuantaClient(f"http://127.0.0.1:{free_port()}", max_retries=1) as client:
        with pytest.raises(QueryError) as raised:
            list(client.query("d", "Q"))
        assert raised.value.kind is ErrorKind.UNREACHABLE and client.requests == 2


def test_quanta_client_goes_through_the_proxy_the_environment_names(
    scripted: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = scripted(page(["via proxy"], None))
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with QuantaClient("http://quanta.invalid:8000") as client:
        assert [b["x"]["value"] for b in client.query("d", "Q")] == ["via proxy"]
    assert proxy.paths == ["http://quanta.invalid:8000/v1/datasets/d/query"]
