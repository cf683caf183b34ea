"""Tier 5: autoscaling with the KEDA operator (built from its module, run on the host) against a
real redis-server: the chart's ScaledObject (redis-streams trigger, lag mode) scales the workers
from zero on the first task and back to zero when idle; the values the scaler read are shown."""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from quanta.common import keys
from quanta.common.testing import RedisServer, redis_server

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("QUANTA_K8S_TOOLS", Path.home() / ".cache" / "quanta" / "k8s" / "bin"))
NS = "scaling"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def keda(
    apiserver, require_tools, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[object, RedisServer, str]]:  # type: ignore[no-untyped-def]
    """The operator on the host, the chart installed with KEDA on and an external (host) Redis."""
    require_tools("keda-operator", "keda-crds")
    certs = tmp_path_factory.mktemp("keda-certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=keda", "-keyout", "tls.key",
            "-out", "tls.crt", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", cwd=certs)  # fmt: skip
    (certs / "ca.crt").write_bytes((certs / "tls.crt").read_bytes())
    apiserver.kubectl("apply", "--server-side", "-f", str((TOOLS / "keda-crds").resolve()))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apiserver.kubectl("create", "namespace", "keda")
    metrics_port = free_port()
    env = {**apiserver.env, "KEDA_CLUSTER_OBJECT_NAMESPACE": "keda", "POD_NAMESPACE": "keda", "WATCH_NAMESPACE": ""}
    log = open(apiserver.folder / "keda-operator.log", "w")  # noqa: SIM115 (kept open while it runs)
    operator = subprocess.Popen(
        [str(TOOLS / "keda-operator"), f"--cert-dir={certs}", "--enable-webhook-patching=false",
         "--enable-apiservice-patching=false", f"--metrics-bind-address=127.0.0.1:{metrics_port}",
         f"--health-probe-bind-address=127.0.0.1:{free_port()}", "--leader-elect=false"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        with redis_server() as server:
            apiserver.helm("install", "auto", str(ROOT / "charts" / "quanta"), "-n", NS, "--create-namespace",
                           "--set", "redis.embedded.enabled=false", "--set", f"redis.external.url={server.url}",
                           "--set", "worker.autoscaling.keda.enabled=true",
                           "--set", "worker.autoscaling.keda.pollingInterval=1",
                           "--set", "worker.autoscaling.keda.cooldownPeriod=5")  # fmt: skip
            yield apiserver, server, f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        operator.terminate()
        operator.wait(timeout=30)
        log.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def replicas(cluster) -> int:  # type: ignore[no-untyped-def]
    return int(cluster.get("deployment", "auto-quanta-worker", "-n", NS)["spec"].get("replicas", 1))


def wait_replicas(cluster, wanted: int, timeout: float) -> float:  # type: ignore[no-untyped-def]
    """Seconds until the worker Deployment asks for `wanted` replicas."""
    start = time.monotonic()
    while replicas(cluster) != wanted:
        assert time.monotonic() - start < timeout, f"workers not at {wanted} after {timeout}s: {replicas(cluster)}"
        time.sleep(0.1)
    return time.monotonic() - start


def scaler_values(url: str) -> dict[str, float]:
    """keda_scaler_metrics_value by metric: what the redis-streams scaler last read."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r"^keda_scaler_metrics_value\{([^}]*)\} (\S+)$", text, re.M)
    return {re.search(r'metric="([^"]+)"', labels).group(1): float(v) for labels, v in found}  # type: ignore[union-attr]


def lag_read(url: str) -> float | None:
    values = [v for name, v in scaler_values(url).items() if "redis-streams" in name]
    return values[0] if values else None


def test_workers_scale_from_zero_on_the_first_task_and_back_to_zero(keda) -> None:  # type: ignore[no-untyped-def]
    cluster, server, metrics = keda
    client = redis.Redis.from_url(server.url)
    client.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    scaled = cluster.get("scaledobject", "auto-quanta-worker", "-n", NS)
    assert scaled["spec"]["triggers"][0]["metadata"]["address"] == f"127.0.0.1:{server.port}"
    idle_to_zero = wait_replicas(cluster, 0, timeout=60)  # idle: KEDA takes the workers to zero

    for i in range(7):
        client.xadd(keys.TASKS, {"task": f"t{i}".encode()})
    from_zero = wait_replicas(cluster, 1, timeout=30)
    group = client.xinfo_groups(keys.TASKS)[0]
    assert (group["lag"], group["pending"]) == (7, 0)
    deadline = time.monotonic() + 15
    while lag_read(metrics) != 7:
        assert time.monotonic() < deadline, scaler_values(metrics)
        time.sleep(0.2)

    # a worker takes and finishes every task: lag 0, nothing pending, the stream empty
    taken = client.xreadgroup(keys.GROUP, "w1", {keys.TASKS: ">"}, count=10)[0][1]
    for entry_id, _ in taken:
        client.xack(keys.TASKS, keys.GROUP, entry_id)
        client.xdel(keys.TASKS, entry_id)
    back_to_zero = wait_replicas(cluster, 0, timeout=60)
    print(f"\nidle -> 0: {idle_to_zero:.1f} s; 0 -> 1 after 7 tasks: {from_zero:.1f} s; 1 -> 0 after the last ack: "
          f"{back_to_zero:.1f} s; scaler read {scaler_values(metrics)}")  # fmt: skip
