"""The worker's one settings object: everything it reads from the environment (QUANTA_*).

Command-line flags override the environment (`quanta up` and tests pass flags;
the Helm chart sets variables).
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from quanta.common.catalog import Dataset
from quanta.common.settings import EnvSettings, RedisSettings, SettingsError, setting

MIN_STALL_S = 5.0  # the automatic stall limit's floor: far above any quantum, under the gateway's 30 s wait
# The watchdog's second hand: this long after the stall limit, a main thread that has not come
# back to Python (stuck in C code that holds the GIL) is ended by the worker's stall recorder
# (quanta.worker.stalls), which has counted the stall against the task halfway through.
STALL_GRACE_S = 1.0
RECLAIM_MARGIN_S = 1.0  # a stuck worker has been ended this long before its task is reclaimed
BLOCK_S = 1.0  # XREADGROUP blocks this long when the stream is empty
HEARTBEAT_S = 1.0  # how often the task loop refreshes the worker's heartbeat (keys.WORKERS)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _host_and_pid() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings(EnvSettings):
    """Read from QUANTA_<FIELD> (quanta.common.settings); `from_env(**flags)` lets flags win."""

    catalog: str | None = None  # dataset catalog (TOML)
    # consumer name (default: host name and pid, unique per process)
    name: str = setting(factory=_host_and_pid, env="QUANTA_WORKER_NAME")
    metrics_port: int = 0  # /metrics, /livez and /readyz (0: off)
    metrics_host: str = "0.0.0.0"
    # Take over tasks idle this long (0: the stall limit plus 2 s, so a task runs on one worker at
    # a time; without a stall limit, 10 quanta, >= 1 s; 10 min for `inf` quanta)
    reclaim_idle_ms: int = 0
    # A task whose engine work (parse or resume, the quantum, suspend, writing the page) runs this
    # long has stalled its worker (quanta.worker.runner.watchdog): it is stopped and answered 422
    # stall-limit, and the worker restarts; one stuck in C code that holds the GIL ends its worker
    # STALL_GRACE_S later, and another worker takes the task over (0: ten quanta of the slowest
    # dataset, at least 5 s; inf: no watchdog). Tasks of `inf` quanta are never watched.
    stall_s: float = setting(0.0, env="QUANTA_WORKER_STALL_S", ge=0)
    # /livez fails when the task loop has not come round for this long (it comes round at least
    # every second, plus the quantum in hand).
    liveness_timeout_s: float = setting(60.0, gt=0)
    log_level: str = "INFO"  # debug, info, warning or error
    redis: RedisSettings = field(default_factory=RedisSettings)

    def check(self) -> None:
        object.__setattr__(self, "log_level", self.log_level.upper())
        if self.log_level not in LOG_LEVELS:
            raise SettingsError(f"QUANTA_LOG_LEVEL: {self.log_level!r} is not debug, info, warning or error")
        if len(self.redis.shards()) > 1:
            raise SettingsError("QUANTA_REDIS_URL: a worker serves one shard of the queue: give it one Redis URL")

    def stall_limit_s(self, datasets: Iterable[Dataset]) -> float | None:
        """Seconds of engine work after which a task has stalled its worker (None: never)."""
        if self.stall_s:
            return None if self.stall_s == math.inf else self.stall_s
        finite = [d.quantum_ms for d in datasets if d.quantum_ms != math.inf]
        return max(MIN_STALL_S, 10 * max(finite, default=0.0) / 1000)

    def reclaim_after_ms(self, datasets: Iterable[Dataset]) -> int:
        """How long a task stays pending before another worker takes it over. Past the stall limit,
        so a live worker's task is never run twice at once and a task that stalls workers stalls
        them one after the other (each delivery is one worker lost). An infinite quantum can run
        for long, so its tasks are reclaimed only after 10 minutes."""
        if self.reclaim_idle_ms:
            return self.reclaim_idle_ms
        datasets = list(datasets)
        longest = max(d.quantum_ms for d in datasets)
        if longest == math.inf:
            return 600_000
        stall = self.stall_limit_s(datasets)
        if stall is None:  # no watchdog: ten quanta, at least a second (a healthy worker answers well within)
            return max(1000, int(10 * longest))
        return int((stall + STALL_GRACE_S + RECLAIM_MARGIN_S) * 1000)

    def heartbeat_stale_s(self, datasets: Iterable[Dataset]) -> float | None:
        """A worker whose heartbeat is older than this is stuck (None: cannot tell, no stall limit):
        its loop beats between tasks, and a task ends by the stall limit plus one slow Redis command."""
        datasets = list(datasets)
        stall = self.stall_limit_s(datasets)
        if stall is None or any(d.quantum_ms == math.inf for d in datasets):
            return None
        return stall + STALL_GRACE_S + self.redis.socket_timeout_s + BLOCK_S + HEARTBEAT_S
