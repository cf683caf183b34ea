"""Fixtures: a real redis-server, the gateway served by uvicorn over real HTTP, and an in-test
consumer that speaks the workers' side of the Redis protocol (quanta.testkit.gateway)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from quanta.common.redis_server import RedisServer, redis_server
from quanta.gateway.config import Settings
from quanta.testkit.gateway import Consumer, Handler, Served, paging_handler

SECRET_KEYS = "k1:0123456789abcdef0123456789abcdef"
CATALOG = """
[datasets.watdiv]
path = "watdiv.hdt"
description = "sample"
quantum_ms = 75
max_results = 100

[datasets.other]
path = "other.hdt"
plan_mode = "reference"
"""


@pytest.fixture(scope="session")
def shared_redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture
def redis_url(shared_redis: RedisServer) -> str:
    """The session's Redis, emptied for each test."""
    redis.Redis.from_url(shared_redis.url).flushall()
    return shared_redis.url


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.toml"
    path.write_text(CATALOG)
    return path


@pytest.fixture
def settings(catalog: Path, redis_url: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"catalog": catalog, "redis": {"url": redis_url}, "secret_keys": SECRET_KEYS}
        values.update(overrides)
        return Settings.from_env(**values)

    return make


@pytest.fixture
def serve() -> Iterator[Callable[[Settings], httpx.Client]]:
    """serve(settings) -> an httpx client for a running gateway."""
    running: list[Served] = []

    def start(settings: Settings) -> httpx.Client:
        running.append(Served(settings))
        return running[-1].client

    yield start
    for served in running:
        served.stop()


@pytest.fixture
def consumer(redis_url: str) -> Iterator[Callable[..., Consumer]]:
    """consumer(handler) -> a running Consumer on the test's Redis."""
    running: list[Consumer] = []

    def start(handler: Handler | None = None, url: str = redis_url) -> Consumer:
        running.append(Consumer(url, handler or paging_handler()))
        return running[-1]

    yield start
    for c in running:
        c.stop()
