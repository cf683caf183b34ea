"""Connection settings, read from the environment in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RedisSettings:
    url: str = "redis://127.0.0.1:6379/0"
    socket_timeout_s: float = 5.0

    @classmethod
    def from_env(cls) -> RedisSettings:
        return cls(url=os.environ.get("QUANTA_REDIS_URL", cls.url))
