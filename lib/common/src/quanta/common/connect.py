"""redis-py clients built from RedisSettings: plain, TLS or through Sentinel."""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel

from quanta.common.settings import RedisSettings


def client_options(settings: RedisSettings) -> dict[str, Any]:
    """Keyword arguments for a redis-py connection to the master (not the URL: TLS files and passwords)."""
    user, password = settings.credentials()
    options: dict[str, Any] = {
        "socket_timeout": settings.socket_timeout_s,
        "socket_connect_timeout": settings.connect_timeout_s,
        "username": user,
        "password": password,
        "db": settings.db(),
    }
    if settings.tls:
        options |= {
            "ssl": True,
            "ssl_ca_certs": settings.tls_ca_file,
            "ssl_certfile": settings.tls_cert_file,
            "ssl_keyfile": settings.tls_key_file,
            "ssl_check_hostname": settings.tls_check_hostname,
        }
    return options


def sentinel_options(settings: RedisSettings) -> dict[str, Any]:
    """How to reach the Sentinels themselves: the same TLS as the master, their own password."""
    options = {k: v for k, v in client_options(settings).items() if k.startswith(("ssl", "socket_"))}
    if settings.sentinel_password:
        options["password"] = settings.sentinel_password
    return options


def sync_client(settings: RedisSettings, **extra: Any) -> redis.Redis:
    if settings.sentinels:
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            settings.sentinel_addresses(), sentinel_kwargs=sentinel_options(settings)
        )
        master = sentinel.master_for(settings.sentinel_master, **{**client_options(settings), **extra})  # type: ignore[no-untyped-call]
        return cast(redis.Redis, master)
    if settings.url.startswith("unix://"):
        return redis.Redis.from_url(settings.url, **{"socket_timeout": settings.socket_timeout_s, **extra})
    host, port = settings.address()
    return redis.Redis(host=host, port=port, **{**client_options(settings), **extra})


def async_client(settings: RedisSettings, **extra: Any) -> redis.asyncio.Redis:
    if settings.sentinels:
        sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            settings.sentinel_addresses(), sentinel_kwargs=sentinel_options(settings)
        )
        master = sentinel.master_for(settings.sentinel_master, **{**client_options(settings), **extra})
        return cast(redis.asyncio.Redis, master)
    if settings.url.startswith("unix://"):
        return redis.asyncio.Redis.from_url(settings.url, **{"socket_timeout": settings.socket_timeout_s, **extra})
    host, port = settings.address()
    return redis.asyncio.Redis(host=host, port=port, **{**client_options(settings), **extra})
