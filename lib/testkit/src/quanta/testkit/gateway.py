"""Helpers for tests of the gateway (and of anything behind it): the gateway served by uvicorn
in a thread over real HTTP, and a minimal consumer speaking the workers' side of the Redis
protocol (stream, consumer group, reply list with a TTL, heartbeat)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import redis
import uvicorn

from quanta.common import keys
from quanta.common.redis_server import free_port
from quanta.gateway.config import Settings
from quanta.gateway.main import create_app
from quanta.gateway.tasks.dispatch import Dispatcher, Outcome
from quanta.queue.v1 import queue_pb2


def follow(client: httpx.Client, dataset: str, first: dict[str, object]) -> list[dict[str, Any]]:
    """A /v1 query's pages, from `first` (the request body) to the last, each `next` in turn."""
    pages = [client.post(f"/v1/datasets/{dataset}/query", json=first)]
    while pages[-1].status_code == 200 and pages[-1].json()["next"]:
        pages.append(client.post(f"/v1/datasets/{dataset}/query", json={"next": pages[-1].json()["next"]}))
    assert pages[-1].status_code == 200, pages[-1].text
    return [p.json() for p in pages]


def new_task(rows: queue_pb2.RowFormat = queue_pb2.ROW_FORMAT_JSON) -> queue_pb2.Task:
    """A task that starts a query (ASK {}: the in-test consumer answers whatever it is asked)."""
    return queue_pb2.Task(id=uuid.uuid4().hex, dataset="watdiv", query="ASK {}", rows=rows)


def dispatch(settings: Settings, tasks: list[queue_pb2.Task], client: str = "ip:127.0.0.1") -> list[Outcome]:
    """Run `tasks` in turn through a dispatcher built as the gateway builds it (no HTTP)."""

    async def go() -> list[Outcome]:
        dispatcher = Dispatcher.from_settings(settings)
        try:
            return [await dispatcher.run(client, task) for task in tasks]
        finally:
            await dispatcher.shards.aclose()

    return asyncio.run(go())


class Served:
    """uvicorn in a thread (real sockets, real lifespan) around one app."""

    def __init__(self, settings: Settings) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # As `quanta gateway` runs it: client addresses are the gateway's business (QUANTA_TRUST_FORWARDED).
        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=self.port, log_level="warning", proxy_headers=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "gateway did not start"
            time.sleep(0.005)
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)


Handler = Callable[[queue_pb2.Task], queue_pb2.Reply | None]


def paging_handler(pages: int = 3, rows: int = 2) -> Handler:
    """A query that takes `pages` quanta: the plan counts the pages done, by value or by reference."""

    def handle(task: queue_pb2.Task) -> queue_pb2.Reply:
        if task.WhichOneof("input") == "plan":
            done = int(task.plan.decode().split(":")[1])
        elif task.WhichOneof("input") == "plan_ref":
            done = int(task.plan_ref.split("-")[1])
        else:
            done = 0
        done += 1
        bindings = ",".join(f'{{"x":{{"type":"literal","value":"{done}.{i}"}}}}' for i in range(rows))
        page = queue_pb2.Page(head=["x"], bindings_json=f"[{bindings}]".encode(), results=rows)
        page.stats.worker = "test-worker"
        page.stats.quantum_ms = 1.5
        if done < pages:
            if task.plan_mode == queue_pb2.PLAN_MODE_REFERENCE:
                page.plan_ref = f"{task.id}-{done}"
            else:
                page.plan = f"plan:{done}".encode()
            page.stats.plan_bytes = 6
        return queue_pb2.Reply(id=task.id, page=page)

    return handle


class Consumer:
    """The workers' half of the protocol, minimal: XREADGROUP a task, LPUSH its Reply with a TTL,
    XACK and XDEL. It also beats like a worker, so /readyz sees it."""

    def __init__(self, url: str, handler: Handler, name: str = "test-worker") -> None:
        self.redis = redis.Redis.from_url(url)
        self.handler, self.name = handler, name
        self.tasks: list[queue_pb2.Task] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.step()
            except redis.ConnectionError:
                time.sleep(0.05)  # Redis restarting (a test does that): keep trying, as a worker would

    def step(self) -> None:
        with contextlib.suppress(redis.ResponseError):  # BUSYGROUP: it exists already
            self.redis.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
        self.redis.zadd(keys.WORKERS, {self.name: time.time()})
        entries: Any = self.redis.xreadgroup(keys.GROUP, self.name, {keys.TASKS: ">"}, count=1, block=50)
        for _, messages in entries or []:
            for entry_id, fields in messages:
                task = queue_pb2.Task.FromString(fields[b"task"])
                self.tasks.append(task)
                reply = self.handler(task)
                with self.redis.pipeline() as pipe:
                    if reply is not None:
                        pipe.lpush(task.reply_to, reply.SerializeToString())
                        pipe.expire(task.reply_to, keys.REPLY_TTL_S)
                    pipe.xack(keys.TASKS, keys.GROUP, entry_id)
                    pipe.xdel(keys.TASKS, entry_id)
                    pipe.execute()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.redis.close()


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    """Assert an RFC 9457 answer of this type and status; return its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == f"https://quanta.dev/problems/{slug}"
    assert body["status"] == status
    return body  # type: ignore[no-any-return]
