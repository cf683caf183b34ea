"""Redis connection settings, read from the environment in one place (QUANTA_REDIS_*).

Every role (gateway, worker) connects to Redis with the same options, so the
chart sets the same variables on every pod: a plain, TLS (`rediss://` plus a
CA file and, for mutual TLS, a client certificate) or Sentinel-managed Redis.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import unquote, urlsplit


class SettingsError(ValueError):
    """A variable that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class RedisSettings:
    url: str = "redis://127.0.0.1:6379/0"
    socket_timeout_s: float = 5.0  # per command; a blocking read's own timeout comes on top
    connect_timeout_s: float = 2.0
    password: str | None = None  # overrides the URL's (so the URL can stay out of Secrets)
    tls_ca_file: str | None = None  # CA bundle that signed the server's certificate (rediss://)
    tls_cert_file: str | None = None  # client certificate, for Redis's tls-auth-clients
    tls_key_file: str | None = None
    tls_check_hostname: bool = True
    # "host:port,host:port": ask these Sentinels for the master of `sentinel_master`;
    # the URL then gives only the scheme (TLS or not), database and password.
    sentinels: str = ""
    sentinel_master: str = "mymaster"
    sentinel_password: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RedisSettings:
        """QUANTA_REDIS_URL, QUANTA_REDIS_TIMEOUT_S, QUANTA_REDIS_CONNECT_TIMEOUT_S, ...: each field's
        name in upper case after QUANTA_REDIS_ (socket_timeout_s is QUANTA_REDIS_TIMEOUT_S)."""
        source: Mapping[str, str] = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = "QUANTA_REDIS_" + ("TIMEOUT_S" if f.name == "socket_timeout_s" else f.name.upper())
            if f.name == "url":
                name = "QUANTA_REDIS_URL"
            raw = source.get(name)
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(name, raw, f.default)
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        scheme = urlsplit(self.url).scheme
        if scheme not in ("redis", "rediss", "unix"):
            raise SettingsError(f"QUANTA_REDIS_URL: scheme must be redis://, rediss:// or unix://, not {scheme!r}")
        if self.sentinels and scheme == "unix":
            raise SettingsError("QUANTA_REDIS_SENTINELS cannot be used with a unix:// QUANTA_REDIS_URL")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise SettingsError("QUANTA_REDIS_TLS_CERT_FILE and QUANTA_REDIS_TLS_KEY_FILE go together")
        for path in (self.tls_ca_file, self.tls_cert_file, self.tls_key_file):
            if path and not os.path.isfile(path):
                raise SettingsError(f"Redis TLS file not found: {path}")
        self.sentinel_addresses()

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "rediss"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for rediss:// (None for plain Redis): verifies the server against the CA file
        (or the system's CAs), and presents a client certificate when one is given."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.tls_ca_file)
        context.check_hostname = self.tls_check_hostname
        if self.tls_cert_file:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return context

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        out = []
        for item in filter(None, (s.strip() for s in self.sentinels.split(","))):
            host, sep, port = item.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise SettingsError(f"QUANTA_REDIS_SENTINELS: expected host:port,..., got {item!r}")
            out.append((host.strip("[]"), int(port)))
        return out

    def address(self) -> tuple[str, int]:
        """Host and port of the URL (for a Sentinel setup: unused)."""
        parts = urlsplit(self.url)
        return parts.hostname or "localhost", parts.port or 6379

    def db(self) -> int:
        path = urlsplit(self.url).path.strip("/")
        return int(path) if path.isdigit() else 0

    def credentials(self) -> tuple[str | None, str | None]:
        """(username, password): the password setting wins over the URL's."""
        parts = urlsplit(self.url)
        user = unquote(parts.username) if parts.username else None
        password = self.password if self.password is not None else (unquote(parts.password) if parts.password else None)
        return user, password

    def redacted_url(self) -> str:
        parts = urlsplit(self.url)
        host = parts.netloc.rpartition("@")[2]
        where = f"sentinels {self.sentinels} master {self.sentinel_master}" if self.sentinels else host
        return f"{parts.scheme}://{where}{parts.path}"


def _parse(name: str, raw: str, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if isinstance(default, float):
            return float(raw)
        return raw
    except ValueError:
        raise SettingsError(f"{name}: cannot read {raw!r}") from None
