"""QuantaClient's protocol handling over real HTTP, against a scripted server: it follows
`next`, waits out Retry-After, resumes from a 504's `next`, and reports problems."""

from __future__ import annotations

import pytest

from quanta.client import QuantaClient, ServiceError
from quanta.client.client import TransportError
from quanta.client.testing import Answer, Script
from quanta.common.local import free_port


def page(values: list[str], next_token: str | None) -> Answer:
    bindings = [{"x": {"type": "literal", "value": v}} for v in values]
    return 200, {"head": {"vars": ["x"]}, "results": {"bindings": bindings}, "next": next_token, "stats": {}}, {}


def test_follows_next_until_null(scripted: Script) -> None:
    server = scripted(page(["a"], "t1"), page(["b", "c"], "t2"), page([], None))
    with QuantaClient(server.url) as client:
        values = [b["x"]["value"] for b in client.query("d", "SELECT ...", plan="reference")]
    assert values == ["a", "b", "c"]
    assert server.bodies == [
        {"query": "SELECT ...", "plan": "reference"},
        {"next": "t1", "plan": "reference"},
        {"next": "t2", "plan": "reference"},
    ]


def test_waits_out_retry_after_then_retries_the_same_request(scripted: Script) -> None:
    busy = (503, {"type": "https://quanta.dev/problems/queue-full", "title": "full"}, {"Retry-After": "1"})
    server = scripted(busy, page(["a"], None))
    with QuantaClient(server.url) as client:
        assert [b["x"]["value"] for b in client.query("d", "Q")] == ["a"]
    assert server.bodies == [{"query": "Q"}, {"query": "Q"}]
    assert server.times[1] - server.times[0] >= 0.95


def test_resumes_from_a_reply_timeouts_next(scripted: Script) -> None:
    timeout = (504, {"title": "no reply", "next": "resume-here"}, {"Retry-After": "1"})
    server = scripted(page(["a"], "t1"), timeout, page(["b"], None))
    with QuantaClient(server.url) as client:
        assert [b["x"]["value"] for b in client.query("d", "Q")] == ["a", "b"]
    assert server.bodies[1:] == [{"next": "t1"}, {"next": "resume-here"}]


def test_a_problem_is_raised_with_its_body(scripted: Script) -> None:
    problem = {"type": "https://quanta.dev/problems/syntax-error", "title": "Syntax error", "line": 1, "column": 8}
    server = scripted((400, problem, {"Content-Type": "application/problem+json"}))
    with QuantaClient(server.url) as client, pytest.raises(ServiceError) as raised:
        list(client.query("d", "SELECT ?"))
    assert raised.value.status == 400 and raised.value.problem == problem


def test_gives_up_on_an_unreachable_service() -> None:
    with QuantaClient(f"http://127.0.0.1:{free_port()}", max_retries=1) as client, pytest.raises(TransportError):
        list(client.query("d", "Q"))


def test_goes_through_the_proxy_the_environment_names(scripted: Script, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = scripted(page(["via proxy"], None))
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with QuantaClient("http://quanta.invalid:8000") as client:
        assert [b["x"]["value"] for b in client.query("d", "Q")] == ["via proxy"]
    assert proxy.paths == ["http://quanta.invalid:8000/v1/datasets/d/query"]
