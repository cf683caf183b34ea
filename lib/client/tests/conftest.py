"""The clients' protocol tests run against scripted HTTP servers (`quanta.testkit.client`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quanta.testkit.client import Answer, Script, Scripted


@pytest.fixture
def scripted() -> Iterator[Script]:
    servers: list[Scripted] = []

    def start(*answers: Answer) -> Scripted:
        servers.append(Scripted(list(answers)))
        return servers[-1]

    yield start
    for server in servers:
        server.server.shutdown()
