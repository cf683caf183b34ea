"""The dispatcher's outcomes, as the smart client running in the gateway meets them: a page,
a worker's error, or one of the transport's refusals, each telling whether to send the same
task again later. Real Redis; the workers' side is the in-test consumer."""

from __future__ import annotations

import asyncio

import pytest
import redis

from quanta.common import keys
from quanta.common.redis_server import free_port
from quanta.gateway.config import Settings
from quanta.gateway.tasks import pages
from quanta.gateway.tasks.dispatch import (
    Answered,
    Failed,
    Outcome,
    QueueFull,
    RateLimited,
    RedisDown,
    ReplyTimeout,
)
from quanta.queue.v1 import queue_pb2
from quanta.sparql import term_rows
from quanta.sparql.errors import ErrorKind
from quanta.sparql.results import write
from quanta.testkit.gateway import dispatch as dispatch_tasks
from quanta.testkit.gateway import new_task, paging_handler


def dispatch(
    settings: Settings, times: int = 1, rows: queue_pb2.RowFormat = queue_pb2.ROW_FORMAT_JSON
) -> list[Outcome]:
    """`times` new tasks through a dispatcher built as the gateway builds it."""
    return dispatch_tasks(settings, [new_task(rows) for _ in range(times)])


def test_a_page(settings, consumer) -> None:
    consumer(paging_handler(pages=2))
    (outcome,) = dispatch(settings())
    assert isinstance(outcome, Answered)
    assert list(outcome.page.head) == ["x"] and outcome.page.plan == b"plan:1"
    assert outcome.round_trip_ms > 0


def test_a_page_of_terms(settings, consumer) -> None:
    """A task asking for rows as terms: the gateway reads them, writes any format."""
    solutions = [("http://ex/a", '"x"@en'), ("_:b", None)]

    def handle(task: queue_pb2.Task) -> queue_pb2.Reply:
        assert task.rows == queue_pb2.ROW_FORMAT_TERMS
        terms, cells = term_rows.encode(solutions)
        page = queue_pb2.Page(head=["s", "o"], results=2, rows=queue_pb2.TermRows(terms=terms, cells=cells))
        return queue_pb2.Reply(id=task.id, page=page)

    consumer(handle)
    (outcome,) = dispatch(settings(), rows=queue_pb2.ROW_FORMAT_TERMS)
    assert isinstance(outcome, Answered)
    assert asyncio.run(pages.rows(outcome.page)) == solutions
    assert write("tsv", list(outcome.page.head), solutions) == '?s\t?o\n<http://ex/a>\t"x"@en\n_:b\t\n'


def test_a_workers_error_is_not_retryable(settings, consumer) -> None:
    error = queue_pb2.Error(kind="syntax-error", message="unexpected '}'", line=3, column=14)
    consumer(lambda task: queue_pb2.Reply(id=task.id, error=error))
    (outcome,) = dispatch(settings())
    assert isinstance(outcome, Failed)
    assert outcome.kind is ErrorKind.SYNTAX_ERROR and not outcome.kind.retryable
    assert (outcome.error.line, outcome.error.column) == (3, 14)


def test_rate_limited_then_retry_later(settings, consumer) -> None:
    consumer()
    first, second = dispatch(settings(rate_limit=0.5, rate_burst=1), times=2)
    assert isinstance(first, Answered)
    assert isinstance(second, RateLimited)
    assert second.kind is ErrorKind.RATE_LIMITED and second.kind.retryable and second.retry_after_s == 2


def test_queue_full(settings) -> None:
    r = redis.Redis.from_url(settings().redis.url)
    r.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    r.xadd(keys.TASKS, {"task": b"queued"})
    (outcome,) = dispatch(settings(max_queue=1, retry_after_s=7))
    assert isinstance(outcome, QueueFull) and outcome.retry_after_s == 7 and outcome.kind.retryable
    assert r.xlen(keys.TASKS) == 1


def test_redis_down(settings) -> None:
    (outcome,) = dispatch(settings(redis={"url": f"redis://127.0.0.1:{free_port()}/0"}))
    assert isinstance(outcome, RedisDown) and outcome.kind is ErrorKind.REDIS_UNAVAILABLE and outcome.kind.retryable


def test_reply_timeout_withdraws_the_task(settings) -> None:
    (outcome,) = dispatch(settings(reply_timeout_s=0.2))
    assert isinstance(outcome, ReplyTimeout) and outcome.timeout_s == pytest.approx(0.2)
    assert outcome.kind is ErrorKind.REPLY_TIMEOUT and outcome.kind.retryable
    assert redis.Redis.from_url(settings().redis.url).xlen(keys.TASKS) == 0
