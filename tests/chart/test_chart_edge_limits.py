"""The gateway's connection limits (issue 17): the chart's defaults are the gateway's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quanta.gateway.config import Settings

from .test_chart_features import env

EDGE = {  # chart setting -> the gateway's setting
    "headerTimeoutSeconds": "header_timeout_s", "bodyTimeoutSeconds": "body_timeout_s",
    "idleTimeoutSeconds": "idle_timeout_s", "sendTimeoutSeconds": "send_timeout_s",
    "maxHeaderBytes": "max_header_bytes", "maxConnections": "max_connections", "publicUrl": "public_url",
    "maxConnectionsPerAddress": "max_connections_per_address", "queueReserve": "queue_reserve",
    "localShare": "local_share",
}  # fmt: skip


def test_the_edge_defaults_are_the_gateways(render: Any, one: Any) -> None:
    variables = env(one(render(), "Deployment", "-gateway"))
    defaults = Settings.from_env({}, catalog=Path("catalog.toml"), secret_keys="k:0123456789abcdef")
    for name in EDGE.values():
        assert float(variables[f"QUANTA_{name.upper()}"] or 0) == float(getattr(defaults, name) or 0), name


def test_edge_settings_reach_the_environment(render: Any, one: Any) -> None:
    values = {
        "gateway": {"settings": {"headerTimeoutSeconds": 7, "maxConnections": 300, "publicUrl": "https://q.example"}}
    }
    variables = env(one(render(values), "Deployment", "-gateway"))
    assert (variables["QUANTA_HEADER_TIMEOUT_S"], variables["QUANTA_MAX_CONNECTIONS"]) == ("7", "300")
    assert variables["QUANTA_PUBLIC_URL"] == "https://q.example"
