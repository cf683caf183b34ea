"""The worker's settings (environment, then flags), its probes over HTTP, and its JSON logs."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request

import pytest

from quanta.common.redis_server import free_port
from quanta.common.settings import SettingsError
from quanta.worker.config import WorkerSettings
from quanta.worker.health import Health


def test_settings_come_from_the_environment_and_flags_win() -> None:
    env = {
        "QUANTA_CATALOG": "/etc/quanta/catalog.toml",
        "QUANTA_WORKER_NAME": "w-env",
        "QUANTA_METRICS_PORT": "9100",
        "QUANTA_RECLAIM_IDLE_MS": "2500",
        "QUANTA_LIVENESS_TIMEOUT_S": "30",
        "QUANTA_LOG_LEVEL": "warning",
        "QUANTA_REDIS_URL": "redis://redis:6379/1",
        "QUANTA_REDIS_TIMEOUT_S": "3",
    }
    s = WorkerSettings.from_env(env, name="w-flag", metrics_port=None)
    assert (s.catalog, s.name, s.metrics_port, s.reclaim_idle_ms) == ("/etc/quanta/catalog.toml", "w-flag", 9100, 2500)
    assert (s.liveness_timeout_s, s.log_level) == (30.0, "WARNING")
    assert (s.redis.url, s.redis.socket_timeout_s) == ("redis://redis:6379/1", 3.0)


@pytest.mark.parametrize(
    "env", [{"QUANTA_METRICS_PORT": "x"}, {"QUANTA_LOG_LEVEL": "loud"}, {"QUANTA_LIVENESS_TIMEOUT_S": "0"}]
)
def test_bad_settings_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        WorkerSettings.from_env(env)


def test_liveness_follows_the_loop_and_readiness_needs_serving_redis_and_no_drain() -> None:
    health = Health(liveness_timeout_s=0.2)
    assert health.live() and not health.ready()  # starting: alive, not ready
    health.serving = True
    health.record(redis_ok=True)
    assert health.live() and health.ready()
    health.record(redis_ok=False)
    assert health.live() and not health.ready()  # Redis down: not ready, but no restart
    health.record(redis_ok=True)
    time.sleep(0.25)
    assert not health.live() and not health.ready()  # the loop is stuck
    health.record(redis_ok=True)
    health.stopping = True
    assert health.live() and not health.ready()


def get(url: str) -> tuple[int, dict[str, object] | str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            body = response.read().decode()
            return response.status, json.loads(body) if body.startswith("{") else body
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_real_worker_serves_probes_and_metrics_and_logs_json(start_worker) -> None:
    port = free_port()
    proc = start_worker("--metrics-port", str(port))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while get(f"{base}/readyz")[0] != 200:
        assert time.monotonic() < deadline, get(f"{base}/readyz")
        time.sleep(0.05)
    status, body = get(f"{base}/livez")
    assert status == 200 and isinstance(body, dict) and body["serving"] is True
    status, text = get(f"{base}/metrics")
    assert status == 200 and "quanta_quantum_seconds" in str(text)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert proc.stderr is not None
    records = [json.loads(line) for line in proc.stderr.read().decode().splitlines()]
    assert [r["msg"] for r in records][-2:] == ["worker serving", "worker stopped"]
    assert records[-1]["worker"] and records[-2]["datasets"] == ["tiny-plans", "watdiv"]
