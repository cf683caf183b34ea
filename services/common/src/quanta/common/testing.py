"""Helpers for tests of the services: a real redis-server (see `local`)."""

from quanta.common.local import RedisServer, free_port, redis_server

__all__ = ["RedisServer", "free_port", "redis_server"]
