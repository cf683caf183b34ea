"""The HTTP edge's pure parts (the rest is tested end to end: tests/e2e/test_hardening_connections.py)."""

from __future__ import annotations

import resource

from quanta.gateway.server import connection_cap
from quanta.gateway.sparql_endpoint.description import origin


def test_the_connection_cap_stays_below_half_the_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (400, hard))
    try:
        assert connection_cap(1000) == 200
        assert connection_cap(50) == 50
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_origin_is_the_address_reached_or_the_configured_one() -> None:
    assert origin({"scheme": "http", "server": ("10.0.0.5", 8000)}, "") == "http://10.0.0.5:8000"
    assert origin({"scheme": "http", "server": ("10.0.0.5", 80)}, "") == "http://10.0.0.5"
    assert origin({"scheme": "http", "server": ("::1", 8000)}, "") == "http://[::1]:8000"
    assert origin({"scheme": "http", "server": ("10.0.0.5", 8000)}, "https://q.example/") == "https://q.example"
