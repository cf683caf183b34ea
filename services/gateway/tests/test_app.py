"""The catalog, the OpenAPI document, settings from the environment, JSON logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from quanta.common.logs import JsonFormatter, request_id
from quanta.common.settings import SettingsError
from quanta.gateway.config import Settings
from quanta.sparql.errors import ErrorKind


def test_datasets_show_public_fields_only(settings, serve) -> None:
    body = serve(settings()).get("/v1/datasets").json()
    assert body == {
        "datasets": [
            {
                "name": "watdiv",
                "description": "sample",
                "quantum_ms": 75.0,
                "max_results": 100,
                "plan_mode": "auto",
                "examples": [],
                "graphs": [],
            },
            {
                "name": "other",
                "description": "",
                "quantum_ms": 75.0,
                "max_results": 100_000,
                "plan_mode": "reference",
                "examples": [],
                "graphs": [],
            },
        ]
    }


def test_openapi_documents_pages_and_problems(settings, serve) -> None:
    doc = serve(settings()).get("/openapi.json").json()
    query = doc["paths"]["/v1/datasets/{name}/query"]["post"]
    assert query["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/QueryRequest")
    assert query["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/QueryPage")
    statuses = {str(kind.status) for kind in ErrorKind}
    assert statuses <= set(query["responses"])
    assert "syntax-error" in query["responses"]["400"]["description"]
    assert query["responses"]["504"]["content"]["application/problem+json"]["schema"]["$ref"].endswith(
        "/ProblemDetails"
    )
    schemas = doc["components"]["schemas"]
    assert {"QueryRequest", "QueryPage", "ProblemDetails", "Stats", "DatasetList", "Readiness"} <= set(schemas)
    assert {"/healthz", "/readyz", "/metrics", "/v1/datasets"} <= set(doc["paths"])


def test_method_not_allowed_is_a_problem(settings, serve) -> None:
    response = serve(settings()).get("/v1/datasets/watdiv/query")
    assert response.status_code == 405 and response.headers["content-type"] == "application/problem+json"


def test_settings_from_environment(catalog: Path, monkeypatch) -> None:
    monkeypatch.setenv("QUANTA_CATALOG", str(catalog))
    monkeypatch.setenv("QUANTA_SECRET_KEYS", "new:0123456789abcdef0123,old:fedcba9876543210fedc")
    monkeypatch.setenv("QUANTA_MAX_QUEUE", "7")
    monkeypatch.setenv("QUANTA_TRUST_FORWARDED", "true")
    monkeypatch.setenv("QUANTA_REDIS_CONNECT_TIMEOUT_S", "0.5")
    settings = Settings.from_env()
    assert settings.max_queue == 7 and settings.trust_forwarded
    # the worker's variables, with the gateway's defaults: it gives up on Redis sooner (a client waits)
    assert (settings.redis.socket_timeout_s, settings.redis.connect_timeout_s) == (2.0, 0.5)
    assert [kid for kid, _ in settings.signing_keys()] == ["new", "old"]
    assert "0123456789" not in repr(settings)


def test_dev_mode_generates_a_secret(catalog: Path, monkeypatch, caplog) -> None:
    monkeypatch.delenv("QUANTA_SECRET_KEYS", raising=False)
    with pytest.raises(SettingsError, match="QUANTA_SECRET_KEYS is required"):
        Settings.from_env(catalog=catalog)
    with caplog.at_level(logging.WARNING):
        one, two = Settings.from_env(catalog=catalog, dev=True), Settings.from_env(catalog=catalog, dev=True)
    assert one.signing_keys()[0][0] == "dev" and one.signing_keys() != two.signing_keys()
    assert "random key" in caplog.text


def test_json_log_lines_carry_the_request_id() -> None:
    record = logging.makeLogRecord({"name": "quanta.gateway", "levelno": 20, "levelname": "INFO", "msg": "hi %s"})
    record.args = ("there",)
    record.status = 200
    token = request_id.set("r-1")
    try:
        line = json.loads(JsonFormatter().format(record))
    finally:
        request_id.reset(token)
    assert line["msg"] == "hi there" and line["request_id"] == "r-1" and line["status"] == 200
    assert line["level"] == "info" and "pid" in line


def test_infinite_quantum_listed_as_null(settings, serve, tmp_path: Path) -> None:
    catalog = tmp_path / "fcfs.toml"
    catalog.write_text('[datasets.fcfs]\npath = "x.hdt"\nquantum_ms = inf\n')
    body = serve(settings(catalog=catalog)).get("/v1/datasets").json()
    assert body["datasets"][0]["quantum_ms"] is None


def test_the_protocol_documents_every_error_kind() -> None:
    """docs/protocol.md's table of problem types is the list of error kinds."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    table = doc[doc.index("| slug | status |") :].split("\n\n")[0].splitlines()[2:]
    documented = {cells[1].strip(" `"): int(cells[2]) for cells in (row.split("|") for row in table)}
    assert documented == {kind.slug: kind.status for kind in ErrorKind}
