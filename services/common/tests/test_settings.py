"""RedisSettings from the environment: every variable read, bad ones named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from quanta.common.connect import client_options
from quanta.common.settings import RedisSettings, SettingsError


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
