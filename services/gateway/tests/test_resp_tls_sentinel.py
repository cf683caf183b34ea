"""Redis over TLS (rediss://, CA and client certificates made with openssl) and through Sentinel
(a real redis-sentinel, a master and a replica, a failover), for the gateway's RESP pool and the
redis-py clients every role builds from the same settings."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import uvloop

from quanta.common.connect import async_client, sync_client
from quanta.common.redis_server import free_port
from quanta.common.settings import RedisSettings
from quanta.gateway.tasks.resp import RespPool

LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    return LOOPS[request.param]


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(folder: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=folder)  # fmt: skip


def make_cert(folder: Path, ca: str, name: str) -> None:
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=folder)  # fmt: skip
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "1", "-extfile", "san.ext", "-out", f"{name}.crt", cwd=folder)  # fmt: skip


def start(*args: str) -> subprocess.Popen[bytes]:
    # its own working directory: a master writes an RDB there to sync a replica
    folder = tempfile.mkdtemp(prefix="quanta-redis-")
    return subprocess.Popen(["redis-server", *args], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (redis.ConnectionError, OSError):
            pass
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    make_ca(folder, "ca")
    make_ca(folder, "other-ca")
    make_cert(folder, "ca", "server")
    make_cert(folder, "ca", "client")
    return folder


@pytest.fixture(scope="module")
def tls_redis(certs: Path) -> Iterator[int]:
    """A redis-server that speaks only TLS and requires a client certificate signed by the CA."""
    port = free_port()
    proc = start("--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--tls-cert-file", str(certs / "server.crt"), "--tls-key-file", str(certs / "server.key"),
                 "--tls-ca-cert-file", str(certs / "ca.crt"), "--tls-auth-clients", "yes")  # fmt: skip
    settings = tls_settings(certs, port)
    wait_until(lambda: bool(sync_client(settings).ping()))
    yield port
    proc.terminate()
    proc.wait()


def tls_settings(certs: Path, port: int, ca: str = "ca", client_cert: bool = True) -> RedisSettings:
    return RedisSettings(
        url=f"rediss://127.0.0.1:{port}/0", connect_timeout_s=2, tls_ca_file=str(certs / f"{ca}.crt"),
        tls_cert_file=str(certs / "client.crt") if client_cert else None,
        tls_key_file=str(certs / "client.key") if client_cert else None,
    )  # fmt: skip


async def ping_through_pool(settings: RedisSettings) -> Any:
    pool = RespPool(settings)
    try:
        async with pool.connection() as conn:
            await conn.call("SET", "quanta:test", "over tls")
            return await conn.call("GET", "quanta:test")
    finally:
        pool.close()


def test_the_resp_pool_speaks_tls_with_the_ca_and_a_client_certificate(certs: Path, tls_redis: int, run) -> None:
    assert run(ping_through_pool(tls_settings(certs, tls_redis))) == b"over tls"


def test_redis_py_clients_use_the_same_tls_settings(certs: Path, tls_redis: int) -> None:
    settings = tls_settings(certs, tls_redis)
    assert sync_client(settings).set("quanta:sync", "1")

    async def main() -> Any:
        client = async_client(settings)
        try:
            return await client.get("quanta:sync")
        finally:
            await client.aclose()

    assert asyncio.run(main()) == b"1"


def test_a_server_signed_by_another_ca_is_refused(certs: Path, tls_redis: int, run) -> None:
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        run(ping_through_pool(tls_settings(certs, tls_redis, ca="other-ca")))


def test_without_a_client_certificate_the_server_refuses(certs: Path, tls_redis: int) -> None:
    with pytest.raises(redis.ConnectionError):
        asyncio.run(ping_through_pool(tls_settings(certs, tls_redis, client_cert=False)))


@pytest.fixture
def sentinel_pair(tmp_path: Path) -> Iterator[tuple[int, int, int]]:
    """A master, its replica, and one Sentinel watching them (quorum 1): (master, replica, sentinel) ports."""
    master, replica, sentinel = free_port(), free_port(), free_port()
    common = ("--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
    procs = [start("--port", str(master), *common),
             start("--port", str(replica), "--replicaof", "127.0.0.1", str(master), *common)]  # fmt: skip
    wait_until(lambda: redis.Redis(port=master).info("replication")["connected_slaves"] == 1)
    conf = tmp_path / "sentinel.conf"
    conf.write_text(
        f"port {sentinel}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 {master} 1\n"
        "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n"
    )
    procs.append(start(str(conf), "--sentinel"))
    watcher = redis.Redis(port=sentinel)
    wait_until(lambda: len(watcher.sentinel_slaves("mymaster")) == 1)
    yield master, replica, sentinel
    for proc in procs:
        proc.terminate()
        proc.wait()


async def port_of_master(settings: RedisSettings) -> int:
    """Connect through the pool, write, and say which server answered."""
    pool = RespPool(settings)
    try:
        async with pool.connection() as conn:
            await conn.call("SET", "quanta:where", "here")
            info = (await conn.call("INFO", "server")).decode()
            return int(next(line.split(":")[1] for line in info.splitlines() if line.startswith("tcp_port:")))
    finally:
        pool.close()


def master_port(sentinel: int) -> int | None:
    """The port of the master the Sentinel names."""
    address = redis.Redis(port=sentinel).sentinel_get_master_addr_by_name("mymaster")
    return address[1] if isinstance(address, tuple) else None


def test_sentinel_names_the_master_and_new_connections_follow_a_failover(sentinel_pair, run) -> None:
    master, replica, sentinel = sentinel_pair
    settings = RedisSettings(url="redis:///0", sentinels=f"127.0.0.1:{free_port()},127.0.0.1:{sentinel}")
    assert run(port_of_master(settings)) == master  # the first Sentinel is down: the next one answers
    assert sync_client(settings).get("quanta:where") == b"here"

    redis.Redis(port=sentinel).sentinel_failover("mymaster")
    wait_until(lambda: redis.Redis(port=replica).info("replication")["role"] == "master")
    wait_until(lambda: master_port(sentinel) == replica)
    assert run(port_of_master(settings)) == replica
    wait_until(lambda: sync_client(settings).set("quanta:after", "1") is True)
