"""Settings from the environment, the same way in every role, and the Redis settings they share.

A role's settings are one frozen dataclass deriving from `EnvSettings` (the gateway's
`quanta.gateway.config.Settings`, the worker's `quanta.worker.config.WorkerSettings`). Each
field is read from QUANTA_<FIELD> (or the variable its `setting(env=...)` names), parsed by its
type and checked against its bounds and by the class's `check()`; a bad value raises
SettingsError, which names the variable. An empty variable counts as unset, except for a field
declared with `keep_empty` (where "" means something). A field whose type is itself an
`EnvSettings` (RedisSettings) is read from its own variables, starting from that field's default:
so every role reads the same QUANTA_REDIS_* variables, and a role may give them other defaults.
"""

from __future__ import annotations

import operator
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any, ClassVar, Self, get_args, get_type_hints
from urllib.parse import unquote, urlsplit


class SettingsError(ValueError):
    """A variable that cannot be used; the message names it."""


def setting(
    default: Any = MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    env: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    secret: bool = False,
    keep_empty: bool = False,
) -> Any:
    """A field of an EnvSettings class that needs more than a default: its bounds, a variable
    other than QUANTA_<FIELD>, a default made per instance (`factory`), a value kept out of repr
    (`secret`), or an empty variable that is a value (`keep_empty`)."""
    options = {"env": env, "ge": ge, "gt": gt, "le": le, "lt": lt, "keep_empty": keep_empty or None}
    metadata = {key: value for key, value in options.items() if value is not None}
    if factory is not None:
        return field(default_factory=factory, repr=not secret, metadata=metadata)
    return field(default=default, repr=not secret, metadata=metadata)


_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "le": (operator.le, "<="), "lt": (operator.lt, "<")}
_TRUE, _FALSE = {"1", "true", "t", "yes", "y", "on"}, {"0", "false", "f", "no", "n", "off"}
_KINDS = {int: "an integer", float: "a number"}


class EnvSettings:
    """The base of every role's settings: see the module's docstring."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    env_prefix: ClassVar[str] = "QUANTA_"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """From the environment (or `env`), then `overrides` that are not None (a command's flags, a
        test's values); the override of a nested settings field is a mapping of its own fields."""
        make: Callable[..., Self] = cls
        return make(**cls._read(os.environ if env is None else env, overrides))

    @classmethod
    def variable(cls, f: Field[Any]) -> str:
        """The environment variable of field `f`."""
        return str(f.metadata.get("env") or cls.env_prefix + f.name.upper())

    @classmethod
    def _read(cls, source: Mapping[str, str], overrides: Mapping[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        kinds = get_type_hints(cls)
        for f in fields(cls):
            kind, given, name = kinds[f.name], overrides.get(f.name), cls.variable(f)
            raw = source.get(name)
            if isinstance(kind, type) and issubclass(kind, EnvSettings) and not isinstance(given, kind):
                start = kind() if f.default_factory is MISSING else f.default_factory()  # the role's defaults
                values[f.name] = replace(start, **kind._read(source, given or {}))
            elif given is not None:
                values[f.name] = given
            elif raw or (raw == "" and f.metadata.get("keep_empty")):
                values[f.name] = _parse(name, raw, kind)
            elif f.default is MISSING and f.default_factory is MISSING:
                raise SettingsError(f"{name} is required")
        return values

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            for bound, (holds, sign) in _BOUNDS.items():
                limit = f.metadata.get(bound)
                if limit is not None and not holds(value, limit):  # `not`: NaN fails every bound
                    raise SettingsError(f"{self.variable(f)}: {value!r} is not {sign} {limit}")
        self.check()

    def check(self) -> None:
        """What bounds cannot say (fields that go together...): raise SettingsError naming the variable."""


def _parse(name: str, raw: str, kind: Any) -> Any:
    kind = next((k for k in get_args(kind) if k is not type(None)), kind)  # `X | None`: an X
    if kind is bool:
        word = raw.strip().lower()
        if word not in _TRUE | _FALSE:
            raise SettingsError(f"{name}: {raw!r} is not a boolean (1, true, yes, on; 0, false, no, off)")
        return word in _TRUE
    try:
        return kind(raw)
    except ValueError:
        raise SettingsError(f"{name}: {raw!r} is not {_KINDS.get(kind, kind.__name__)}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisSettings(EnvSettings):
    """How every role connects to Redis (QUANTA_REDIS_<FIELD>): a plain, TLS (`rediss://` plus a CA
    file and, for mutual TLS, a client certificate) or Sentinel-managed Redis.

    The gateway's URL may list several Redis servers, comma-separated: the queue's shards, in order
    (`shards()`; a plan kept by reference names its shard by index). A worker serves one.
    """

    env_prefix: ClassVar[str] = "QUANTA_REDIS_"

    url: str = "redis://127.0.0.1:6379/0"
    # per command; a blocking read's own timeout comes on top
    socket_timeout_s: float = setting(5.0, env="QUANTA_REDIS_TIMEOUT_S", gt=0)
    connect_timeout_s: float = setting(2.0, gt=0)
    password: str | None = setting(None, secret=True)  # overrides the URL's (so the URL can stay out of Secrets)
    tls_ca_file: str | None = None  # CA bundle that signed the server's certificate (rediss://)
    tls_cert_file: str | None = None  # client certificate, for Redis's tls-auth-clients
    tls_key_file: str | None = None
    tls_check_hostname: bool = True
    # "host:port,host:port": ask these Sentinels for the master of `sentinel_master`;
    # the URL then gives only the scheme (TLS or not), database and password.
    sentinels: str = ""
    sentinel_master: str = "mymaster"
    sentinel_password: str | None = setting(None, secret=True)

    def check(self) -> None:
        urls = self.shard_urls()
        if not urls:
            raise SettingsError("QUANTA_REDIS_URL is empty")
        if len(urls) > 1:
            if self.sentinels:
                raise SettingsError("QUANTA_REDIS_SENTINELS cannot be used with several QUANTA_REDIS_URL shards")
            if len(set(urls)) < len(urls):
                raise SettingsError("QUANTA_REDIS_URL names one shard twice")
            self.shards()  # each shard's settings check its own URL
            return
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

    def shard_urls(self) -> list[str]:
        return [u.strip() for u in self.url.split(",") if u.strip()]

    def shards(self) -> list[RedisSettings]:
        """One settings per shard of the queue (one Redis server each), in the URL's order."""
        urls = self.shard_urls()
        return [self] if urls == [self.url] else [replace(self, url=url) for url in urls]

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
