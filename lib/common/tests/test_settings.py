"""Settings from the environment (EnvSettings, and RedisSettings on it): every variable read,
bad ones named in the error, a role's own defaults for the variables it shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from quanta.common.connect import client_options
from quanta.common.settings import EnvSettings, RedisSettings, SettingsError, setting


@dataclass(frozen=True, slots=True, kw_only=True)
class Role(EnvSettings):
    """A role's settings as the gateway's and the worker's are made."""

    catalog: Path
    max_queue: int = setting(1000, ge=1)
    share: float = setting(0.5, gt=0, le=1)
    dev: bool = False
    origins: str = setting("*", keep_empty=True)
    token: str = setting("", secret=True)
    redis: RedisSettings = field(default_factory=partial(RedisSettings, socket_timeout_s=2.0))


def test_defaults_without_any_variable() -> None:
    assert RedisSettings.from_env({}) == RedisSettings()


def test_every_variable_is_read(tmp_path: Path) -> None:
    for name in ("ca.crt", "c.crt", "c.key"):
        (tmp_path / name).write_text("x")
    s = RedisSettings.from_env(
        {
            "QUANTA_REDIS_URL": "rediss://user:pw@redis.example:6380/3",
            "QUANTA_REDIS_TIMEOUT_S": "0.5",
            "QUANTA_REDIS_CONNECT_TIMEOUT_S": "0.25",
            "QUANTA_REDIS_PASSWORD": "from-secret",
            "QUANTA_REDIS_TLS_CA_FILE": str(tmp_path / "ca.crt"),
            "QUANTA_REDIS_TLS_CERT_FILE": str(tmp_path / "c.crt"),
            "QUANTA_REDIS_TLS_KEY_FILE": str(tmp_path / "c.key"),
            "QUANTA_REDIS_TLS_CHECK_HOSTNAME": "false",
            "QUANTA_REDIS_SENTINELS": "s1:26379, [::1]:26380",
            "QUANTA_REDIS_SENTINEL_MASTER": "primary",
            "QUANTA_REDIS_SENTINEL_PASSWORD": "spw",
        }
    )
    assert (s.socket_timeout_s, s.connect_timeout_s, s.tls, s.tls_check_hostname) == (0.5, 0.25, True, False)
    assert s.credentials() == ("user", "from-secret")  # the password variable wins over the URL's
    assert s.db() == 3 and s.address() == ("redis.example", 6380)
    assert s.sentinel_addresses() == [("s1", 26379), ("::1", 26380)]
    assert s.sentinel_master == "primary" and s.sentinel_password == "spw"
    options = client_options(s)
    assert options["socket_timeout"] == 0.5 and options["ssl"] and options["ssl_ca_certs"].endswith("ca.crt")
    assert "pw" not in s.redacted_url() and "s1:26379" in s.redacted_url()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"QUANTA_REDIS_URL": "http://x"}, "scheme"),
        ({"QUANTA_REDIS_TIMEOUT_S": "soon"}, "QUANTA_REDIS_TIMEOUT_S"),
        ({"QUANTA_REDIS_TLS_CHECK_HOSTNAME": "maybe"}, "QUANTA_REDIS_TLS_CHECK_HOSTNAME"),
        ({"QUANTA_REDIS_TLS_CA_FILE": "/nonexistent/ca.crt"}, "not found"),
        ({"QUANTA_REDIS_TLS_CERT_FILE": "/etc/hostname"}, "go together"),
        ({"QUANTA_REDIS_SENTINELS": "no-port"}, "QUANTA_REDIS_SENTINELS"),
    ],
)
def test_bad_variables_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        RedisSettings.from_env(env)


def test_a_role_reads_its_variables_and_composes_redis_with_its_own_defaults() -> None:
    role = Role.from_env({"QUANTA_CATALOG": "/c.toml", "QUANTA_MAX_QUEUE": "7", "QUANTA_DEV": "yes"})
    assert (role.catalog, role.max_queue, role.share, role.dev) == (Path("/c.toml"), 7, 0.5, True)
    assert (role.redis.socket_timeout_s, role.redis.connect_timeout_s) == (2.0, 2.0)  # its own, then RedisSettings'
    variables = {"QUANTA_CATALOG": "/c.toml", "QUANTA_REDIS_TIMEOUT_S": "3", "QUANTA_REDIS_URL": "redis://r/1"}
    assert Role.from_env(variables).redis == RedisSettings(url="redis://r/1", socket_timeout_s=3.0)


def test_overrides_win_and_none_is_not_given() -> None:
    env = {"QUANTA_CATALOG": "/c.toml", "QUANTA_MAX_QUEUE": "7", "QUANTA_REDIS_URL": "redis://r/1"}
    role = Role.from_env(env, max_queue=9, share=None, redis={"sentinel_master": "m"})
    assert (role.max_queue, role.share, role.redis.url, role.redis.sentinel_master) == (9, 0.5, "redis://r/1", "m")


def test_an_empty_variable_is_unset_unless_empty_means_something() -> None:
    role = Role.from_env({"QUANTA_CATALOG": "/c.toml", "QUANTA_MAX_QUEUE": "", "QUANTA_ORIGINS": ""})
    assert (role.max_queue, role.origins) == (1000, "")
    assert Role.from_env({"QUANTA_CATALOG": "/c.toml"}).origins == "*"


def test_secrets_stay_out_of_repr() -> None:
    role = Role.from_env({"QUANTA_CATALOG": "/c", "QUANTA_TOKEN": "t0ps3cret", "QUANTA_REDIS_PASSWORD": "pw!"})
    assert role.token == "t0ps3cret" and "t0ps3cret" not in repr(role) and "pw!" not in repr(role)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "QUANTA_CATALOG is required"),
        ({"QUANTA_MAX_QUEUE": "0"}, "QUANTA_MAX_QUEUE: 0 is not >= 1"),
        ({"QUANTA_MAX_QUEUE": "many"}, "QUANTA_MAX_QUEUE: 'many' is not an integer"),
        ({"QUANTA_SHARE": "nan"}, "QUANTA_SHARE: nan is not > 0"),
        ({"QUANTA_SHARE": "1.5"}, "QUANTA_SHARE: 1.5 is not <= 1"),
        ({"QUANTA_DEV": "maybe"}, "QUANTA_DEV: 'maybe' is not a boolean"),
        ({"QUANTA_REDIS_TIMEOUT_S": "0"}, "QUANTA_REDIS_TIMEOUT_S: 0.0 is not > 0"),
    ],
)
def test_a_role_names_the_variable_it_cannot_use(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Role.from_env({"QUANTA_CATALOG": "/c.toml"} | env if env else {})
