"""Tier 5: autoscaling with KEDA (built from its module, run on the host) against a real redis-server.
The chart's ScaledObject (redis-streams trigger, lag mode) takes the workers from zero on the first
task and back to zero when idle (KEDA's operator); between one and maxReplicas the HPA KEDA made
scales them on the lag, which the HPA controller reads through KEDA's metrics adapter, served as the
external metrics API by the real API server. The values read are shown."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from quanta.common import keys
from quanta.common.redis_server import RedisServer, redis_server

from .conftest import (
    CHART,
    TOOLS,
    Cluster,
    background,
    certificates,
    external_metric,
    free_port,
    quantity,
    register_external_metrics,
    require,
)

pytestmark = pytest.mark.cluster

NS = "scaling"
MAX = 3  # maxReplicaCount
LAG_PER_WORKER = 5  # lagCount: the HPA's target per worker
HPA = "keda-hpa-auto-quanta-worker"  # the HPA KEDA makes for the ScaledObject


@dataclass
class Keda:
    cluster: Cluster
    server: RedisServer
    redis: redis.Redis
    scaler_metrics: str  # the operator's /metrics: what the scaler last read


@pytest.fixture(scope="module")
def keda(apiserver: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keda]:
    """The operator and the metrics adapter on the host, the adapter registered as the external
    metrics API, the chart installed with KEDA on and an external (host) Redis."""
    require("keda-operator", "keda-adapter", "keda-crds")
    certs = certificates(tmp_path_factory.mktemp("keda-certs"), "keda-metrics-apiserver.keda.svc")
    apiserver.kubectl("apply", "--server-side", "-f", str((TOOLS / "keda-crds").resolve()))
    apiserver.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    env = {**apiserver.env, "KEDA_CLUSTER_OBJECT_NAMESPACE": "keda", "POD_NAMESPACE": "keda", "WATCH_NAMESPACE": ""}
    kubeconfig = apiserver.env["KUBECONFIG"]
    metrics_port, grpc_port, adapter_port = free_port(), free_port(), free_port()
    operator = [str(TOOLS / "keda-operator"), f"--cert-dir={certs}", "--enable-webhook-patching=false",
                "--enable-apiservice-patching=false", f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}", "--leader-elect=false",
                f"--metrics-service-bind-address=127.0.0.1:{grpc_port}"]  # fmt: skip
    # the adapter asks the operator (gRPC, mutual TLS with the certificates in --cert-dir) for the values
    adapter = [str(TOOLS / "keda-adapter"), f"--secure-port={adapter_port}", "--bind-address=127.0.0.1",
               f"--port={free_port()}", f"--cert-dir={certs}", f"--tls-cert-file={certs / 'tls.crt'}",
               f"--tls-private-key-file={certs / 'tls.key'}", f"--metrics-service-address=127.0.0.1:{grpc_port}",
               f"--lister-kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
               f"--authorization-kubeconfig={kubeconfig}"]  # fmt: skip
    with (
        background(operator, apiserver.folder / "keda-operator.log", env),
        background(adapter, apiserver.folder / "keda-adapter.log", env),
        redis_server() as server,
    ):
        registered = register_external_metrics(apiserver, "keda", "keda-metrics-apiserver", adapter_port,
                                               certs / "ca.crt")  # fmt: skip
        print(f"\nKEDA's metrics adapter Available as the external metrics API after {registered:.1f} s")
        install(apiserver, server)
        yield Keda(apiserver, server, redis.Redis.from_url(server.url), f"http://127.0.0.1:{metrics_port}/metrics")


def install(cluster: Cluster, server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    client.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
    keda = "worker.autoscaling.keda"
    cluster.helm("install", "auto", str(CHART), "-n", NS, "--create-namespace",
                 "--set", "redis.embedded.enabled=false", "--set", f"redis.external.url={server.url}",
                 "--set", f"{keda}.enabled=true", "--set", f"{keda}.maxReplicas={MAX}",
                 "--set", f"{keda}.lagCount={LAG_PER_WORKER}", "--set", f"{keda}.pollingInterval=1",
                 "--set", f"{keda}.cooldownPeriod=5",
                 # scale down as soon as the lag drops (Kubernetes' default waits 5 minutes)
                 "--set", f"{keda}.behavior.scaleDown.stabilizationWindowSeconds=0")  # fmt: skip


def replicas(cluster: Cluster) -> int:
    return int(cluster.get("deployment", "auto-quanta-worker", "-n", NS)["spec"].get("replicas", 1))


def wait_replicas(cluster: Cluster, wanted: int, timeout: float) -> float:
    """Seconds until the worker Deployment asks for `wanted` replicas."""
    start = time.monotonic()
    while (now := replicas(cluster)) != wanted:
        assert time.monotonic() - start < timeout, f"workers not at {wanted} after {timeout}s: {now}"
        time.sleep(0.1)
    return time.monotonic() - start


def scaler_values(url: str) -> dict[str, float]:
    """keda_scaler_metrics_value by metric: what the redis-streams scaler last read."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r"^keda_scaler_metrics_value\{([^}]*)\} (\S+)$", text, re.M)
    values = {}
    for labels, value in found:
        metric = re.search(r'metric="([^"]+)"', labels)
        assert metric, labels
        values[metric.group(1)] = float(value)
    return values


def lag_read(url: str) -> float | None:
    values = [v for name, v in scaler_values(url).items() if "redis-streams" in name]
    return values[0] if values else None


def hpa_reading(cluster: Cluster) -> tuple[float | None, int]:
    """What KEDA's HPA last read (the external metric per replica) and the replicas it wants."""
    status = cluster.get("hpa", HPA, "-n", NS).get("status", {})
    current = [m["external"]["current"] for m in status.get("currentMetrics") or [] if m["type"] == "External"]
    value = quantity(current[0]["averageValue"]) if current and "averageValue" in current[0] else None
    return value, int(status.get("desiredReplicas", 0))


def queue(client: redis.Redis, n: int) -> None:
    for i in range(n):
        client.xadd(keys.TASKS, {"task": f"t{i}".encode()})


def finish(client: redis.Redis, n: int) -> None:
    """A worker takes `n` tasks and finishes them: acknowledged and deleted."""
    answer: Any = client.xreadgroup(keys.GROUP, "w1", {keys.TASKS: ">"}, count=n)
    for entry_id, _ in answer[0][1]:
        client.xack(keys.TASKS, keys.GROUP, entry_id)
        client.xdel(keys.TASKS, entry_id)


def lag(client: redis.Redis) -> int:
    groups: Any = client.xinfo_groups(keys.TASKS)
    return int(groups[0]["lag"])


def test_workers_scale_from_zero_on_the_first_task_and_back_to_zero(keda: Keda) -> None:
    cluster, client = keda.cluster, keda.redis
    scaled = cluster.get("scaledobject", "auto-quanta-worker", "-n", NS)
    assert scaled["spec"]["triggers"][0]["metadata"]["address"] == f"127.0.0.1:{keda.server.port}"
    idle_to_zero = wait_replicas(cluster, 0, timeout=60)  # idle: KEDA takes the workers to zero

    queue(client, 3)  # below lagCount: one worker is enough
    from_zero = wait_replicas(cluster, 1, timeout=30)
    assert lag(client) == 3
    deadline = time.monotonic() + 15
    while lag_read(keda.scaler_metrics) != 3:
        assert time.monotonic() < deadline, scaler_values(keda.scaler_metrics)
        time.sleep(0.2)

    finish(client, 3)  # lag 0, nothing pending, the stream empty
    back_to_zero = wait_replicas(cluster, 0, timeout=60)
    print(f"\nidle -> 0: {idle_to_zero:.1f} s; 0 -> 1 after 3 tasks: {from_zero:.1f} s; 1 -> 0 after the last ack: "
          f"{back_to_zero:.1f} s; scaler read {scaler_values(keda.scaler_metrics)}")  # fmt: skip


def test_between_one_and_max_the_hpa_scales_on_the_lag_it_reads_from_the_adapter(keda: Keda) -> None:
    cluster, client = keda.cluster, keda.redis
    metric = cluster.get("hpa", HPA, "-n", NS)["spec"]["metrics"][0]["external"]["metric"]
    name, selector = metric["name"], metric["selector"]["matchLabels"]
    wait_replicas(cluster, 0, timeout=60)
    seen: list[str] = []

    def read(what: str) -> None:
        value, desired = hpa_reading(cluster)
        served = external_metric(cluster, NS, name, selector)
        seen.append(f"{what}: lag {lag(client)}, external metric {served:g}, HPA read {value} per replica, "
                    f"wants {desired}, Deployment {replicas(cluster)}")  # fmt: skip

    queue(client, 3)
    wait_replicas(cluster, 1, timeout=30)
    deadline = time.monotonic() + 30  # the HPA reads 3 tasks for one worker: it keeps one
    while hpa_reading(cluster) != (3.0, 1):
        assert time.monotonic() < deadline, hpa_reading(cluster)
        time.sleep(0.2)
    read("3 tasks")

    queue(client, 17)  # lag 20: 4 workers at 5 tasks each, bounded by maxReplicaCount
    assert external_metric(cluster, NS, name, selector) == 20  # the adapter asks the operator, which asks Redis
    to_max = wait_replicas(cluster, MAX, timeout=60)
    deadline = time.monotonic() + 30
    while hpa_reading(cluster)[1] != MAX:
        assert time.monotonic() < deadline, hpa_reading(cluster)
        time.sleep(0.2)
    time.sleep(3)  # a few more HPA rounds: never past maxReplicaCount
    assert replicas(cluster) == MAX
    read(f"20 tasks (1 -> {MAX} in {to_max:.1f} s)")

    finish(client, 18)  # lag 2: one worker again
    to_one = wait_replicas(cluster, 1, timeout=60)
    read(f"18 tasks done ({MAX} -> 1 in {to_one:.1f} s)")

    finish(client, 2)
    to_zero = wait_replicas(cluster, 0, timeout=60)
    print("\n" + "\n".join(seen) + f"\nthe last 2 tasks done: 1 -> 0 in {to_zero:.1f} s")
