"""The worker's one settings object: everything it reads from the environment (QUANTA_*).

Command-line flags override the environment (`quanta up` and tests pass flags;
the Helm chart sets variables).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from quanta.common.settings import RedisSettings, SettingsError


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    catalog: str | None = None  # QUANTA_CATALOG: dataset catalog (TOML)
    name: str = ""  # QUANTA_WORKER_NAME: consumer name (default: host name and pid, unique per process)
    metrics_port: int = 0  # QUANTA_METRICS_PORT: /metrics, /livez and /readyz (0: off)
    metrics_host: str = "0.0.0.0"  # QUANTA_METRICS_HOST
    reclaim_idle_ms: int = 0  # QUANTA_RECLAIM_IDLE_MS: take over tasks idle this long (0: 10 quanta, >= 1 s)
    # QUANTA_LIVENESS_TIMEOUT_S: /livez fails when the task loop has not come round for this long
    # (it comes round at least every second, plus the quantum in hand).
    liveness_timeout_s: float = 60.0
    log_level: str = "INFO"  # QUANTA_LOG_LEVEL
    redis: RedisSettings = field(default_factory=RedisSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> WorkerSettings:
        """From the environment, then `overrides` that are not None (the command's flags)."""
        source: Mapping[str, str] = os.environ if env is None else env
        read = cls(
            catalog=source.get("QUANTA_CATALOG") or None,
            name=source.get("QUANTA_WORKER_NAME") or f"{socket.gethostname()}-{os.getpid()}",
            metrics_port=_int(source, "QUANTA_METRICS_PORT", 0),
            metrics_host=source.get("QUANTA_METRICS_HOST") or "0.0.0.0",
            reclaim_idle_ms=_int(source, "QUANTA_RECLAIM_IDLE_MS", 0),
            liveness_timeout_s=_float(source, "QUANTA_LIVENESS_TIMEOUT_S", 60.0),
            log_level=(source.get("QUANTA_LOG_LEVEL") or "INFO").upper(),
            redis=RedisSettings.from_env(source),
        )
        settings = replace(read, **{k: v for k, v in overrides.items() if v is not None})
        if settings.log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise SettingsError(f"QUANTA_LOG_LEVEL: {settings.log_level!r} is not debug, info, warning or error")
        if settings.liveness_timeout_s <= 0:
            raise SettingsError("QUANTA_LIVENESS_TIMEOUT_S must be positive")
        return settings


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or ""
    try:
        return int(raw) if raw else default
    except ValueError:
        raise SettingsError(f"{name}: not an integer: {raw!r}") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name) or ""
    try:
        return float(raw) if raw else default
    except ValueError:
        raise SettingsError(f"{name}: not a number: {raw!r}") from None
