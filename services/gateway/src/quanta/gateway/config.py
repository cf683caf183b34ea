"""The gateway's one settings class: everything it reads from the environment (QUANTA_*)."""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path

from quanta.common.settings import EnvSettings, RedisSettings, SettingsError, setting

log = logging.getLogger("quanta.gateway")

KID = re.compile(r"^[A-Za-z0-9._-]{1,32}$")
# Short secrets make HMAC guessable; a generated one is 32 random bytes.
MIN_SECRET_CHARS = 16
SHA256_HEX = re.compile(r"^[0-9A-Fa-f]{64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(EnvSettings):
    """Read from QUANTA_<FIELD> (quanta.common.settings); see docs/protocol.md ("Configuration")."""

    catalog: Path  # dataset catalog (TOML); the gateway only reads names and options
    # "k2:secret2,k1:secret1": the first key signs, every key verifies (rotation).
    secret_keys: str = setting("", secret=True)
    # Development mode: a random secret when none is given (tokens die with the process).
    dev: bool = False
    max_queue: int = setting(1000, ge=1)  # stream length (per shard) past which new tasks get 503
    # The share of max_queue kept for the later tasks of running /sparql queries (their answers may be
    # streaming: a refusal would cut them): every other task gets 503 at max_queue minus the reserve.
    queue_reserve: float = setting(0.2, ge=0, lt=1)
    reply_timeout_s: float = setting(30.0, gt=0)  # wait for a worker's reply, then 504
    rate_limit: float = setting(50.0, ge=0)  # requests/s per client; 0 disables
    rate_burst: int = setting(100, ge=1)  # token bucket size
    max_body_bytes: int = setting(1 << 20, ge=256)
    max_query_chars: int = setting(100_000, ge=16)
    # The HTTP edge (server.py, middleware.py), as nginx bounds it: client_header_timeout,
    # client_body_timeout, keepalive_timeout, send_timeout, large_client_header_buffers,
    # worker_connections. The request line may be as long as a body (max_body_bytes: 414).
    header_timeout_s: float = setting(20.0, gt=0)  # a request's headers arrive within it, else 408
    body_timeout_s: float = setting(20.0, gt=0)  # longest wait for the next piece of a body (408)
    idle_timeout_s: float = setting(5.0, gt=0)  # a kept-alive connection idle this long is closed
    send_timeout_s: float = setting(60.0, gt=0)  # a client that reads nothing this long is dropped
    max_header_bytes: int = setting(32 << 10, ge=1024)  # a request's header fields, else 431
    max_connections: int = setting(1000, ge=1)  # per process (at most half its descriptors)
    # One client address's share of them (an IPv6 address's /64: admission.fairness_key), so that one
    # host cannot hold them all; not applied with trust_forwarded (every connection is the proxy's). 0: no cap.
    max_connections_per_address: int = setting(64, ge=0)
    # The service's public origin (https://sparql.example.org) for the URLs it writes of itself (the
    # service description); "": the address a connection reached, never the client's Host header.
    public_url: str = ""
    # Key clients by the last X-Forwarded-For hop (only behind a proxy that sets it).
    trust_forwarded: bool = False
    # Fair use (issue 17): a client is its address; an X-API-Key counts as a client of its own only
    # when its SHA-256 (hex) is listed here (comma-separated): invented keys change nothing.
    api_key_hashes: str = setting("", secret=True)
    # The tasks one client may have queued or running at once (continuations included): a replay
    # loop fills its own share (429 too-many-tasks), never the whole queue (max_queue).
    max_client_tasks: int = setting(16, ge=1)
    # Retry-After (seconds) when the queue is full or Redis is unreachable.
    retry_after_s: int = setting(1, ge=1)
    access_log: bool = True
    # The SPARQL endpoint (/sparql): fair use per client, without any time limit on a query.
    sparql_max_queries: int = setting(4, ge=0)  # queries one client may run at once; 0: no cap
    sparql_query_rate: float = setting(5.0, ge=0)  # new queries/s per client; 0: no limit
    sparql_query_burst: int = setting(20, ge=1)  # new queries a client may start at once
    # A /sparql piece's first quantum run in the gateway (first_quantum.py), this long at most, when it
    # can read the dataset's files: a small query answered without the queue's hop. 0: never.
    local_quantum_ms: float = setting(0.0, ge=0, le=1000)
    local_share: float = setting(0.5, gt=0, le=1)  # the process's time local quanta may take
    # Each query's client-side operators: rows in memory, then spilled to disk up to a size.
    sparql_memory_rows: int = setting(100_000, ge=1)
    sparql_disk_bytes: int = setting(1 << 30, ge=0)
    sparql_temp_dir: str = ""  # "": the system's temporary directory
    # Client-side spill disk of this gateway process, all queries together (files in sparql_temp_dir):
    # a query whose next temporary file would pass it gets 507 budget-exceeded, like one past its own
    # sparql_disk_bytes; a disk that is full anyway gives 507 disk-full.
    sparql_spill_bytes_total: int = setting(8 << 30, ge=0)
    # Reading a query (both roles; read by quanta.sparql.bounds, which documents them):
    # QUANTA_MAX_QUERY_DEPTH (128), QUANTA_MAX_QUERY_OPERATORS (2000), QUANTA_PARSE_BUDGET_S (3 s of CPU
    # time, 0.5 s more of wall time), QUANTA_PARSE_THREADS (2). Keep QUANTA_WORKER_STALL_S above the budget + 1.5 s.
    # Origins whose pages may call the service from a browser (comma-separated; "*": any; "": none).
    cors_origins: str = setting("*", keep_empty=True)
    # SERVICE endpoints a query may call (IRIs, comma or space separated); none: SERVICE is refused.
    service_allowlist: str = ""
    # QUANTA_REDIS_* (quanta.common.settings.RedisSettings). The gateway gives up on a Redis command
    # sooner than a worker does (2 s, and 1 s to connect): an HTTP client is waiting for the answer.
    redis: RedisSettings = field(default_factory=partial(RedisSettings, socket_timeout_s=2.0, connect_timeout_s=1.0))

    def check(self) -> None:
        for digest in filter(None, (h.strip() for h in self.api_key_hashes.split(","))):
            if not SHA256_HEX.match(digest):
                raise SettingsError(f"QUANTA_API_KEY_HASHES: {digest[:8]}... is not a SHA-256 digest in hex")
        if not self.secret_keys:
            if not self.dev:
                raise SettingsError(
                    "QUANTA_SECRET_KEYS is required (e.g. 'k1:<32 random chars>'); QUANTA_DEV=1 for a dev key"
                )
            log.warning("QUANTA_DEV=1 without QUANTA_SECRET_KEYS: signing with a random key that dies with the process")
            object.__setattr__(self, "secret_keys", "dev:" + secrets.token_urlsafe(32))
        parse_keys(self.secret_keys, allow_short=self.dev)

    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]

    def service_endpoints(self) -> frozenset[str]:
        return frozenset(self.service_allowlist.replace(",", " ").split())

    def signing_keys(self) -> list[tuple[str, bytes]]:
        """(key id, secret) in order; the first signs."""
        return parse_keys(self.secret_keys, allow_short=self.dev)


def parse_keys(spec: str, allow_short: bool = False) -> list[tuple[str, bytes]]:
    keys: list[tuple[str, bytes]] = []
    for item in spec.split(","):
        kid, sep, secret = item.strip().partition(":")
        if not sep or not KID.match(kid) or not secret:
            raise SettingsError(f"QUANTA_SECRET_KEYS: expected 'kid:secret,...' with kid matching {KID.pattern}")
        if len(secret) < MIN_SECRET_CHARS and not allow_short:
            raise SettingsError(f"QUANTA_SECRET_KEYS: secret for {kid!r} is shorter than {MIN_SECRET_CHARS} characters")
        if any(kid == k for k, _ in keys):
            raise SettingsError(f"QUANTA_SECRET_KEYS: key id {kid!r} appears twice")
        keys.append((kid, secret.encode()))
    return keys


@lru_cache
def get_settings() -> Settings:
    """The settings of this process (tests pass their own to create_app instead)."""
    return Settings.from_env()
