"""Tier 5, without KEDA: the chart's HPA (worker.autoscaling.hpa) scales the workers on the external
metric quanta_queue_lag. A real gateway on the host exports the gauge from a real redis-server, a
real Prometheus scrapes it (with the `namespace` and `service` labels the chart's ServiceMonitor
gives), prometheus-adapter (built from its module) serves it as the external metrics API with the
rules of charts/values/prometheus-adapter.yaml, and the HPA controller of the real API server reads
it. The values read are shown."""

from __future__ import annotations

import os
import shutil
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import yaml

from quanta.common import keys
from quanta.common.redis_server import redis_server

from .conftest import (
    CHART,
    ROOT,
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

NS = "queue"
RELEASE = "hpa"
GATEWAY_SERVICE = f"{RELEASE}-quanta-gateway"  # the label the HPA selects on
HPA = f"{RELEASE}-quanta-worker"
MAX = 3  # maxReplicas
TARGET = 5  # targetAverageValue: tasks waiting per worker
METRIC = "quanta_queue_lag"


@dataclass
class Stack:
    cluster: Cluster
    redis: redis.Redis
    prometheus: str


def wait_http(url: str, process: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"{url}: the process exited"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"{url} not answering after {timeout}s"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def stack(apiserver: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A gateway, Prometheus and prometheus-adapter on the host, the adapter registered as the
    external metrics API, the chart installed with its HPA (no KEDA) and an external (host) Redis."""
    require("prometheus-adapter", "prometheus")
    folder = tmp_path_factory.mktemp("hpa")
    certs = certificates(folder / "certs", "prometheus-adapter.monitoring.svc")
    shutil.copy(ROOT / "data" / "watdiv-100k.hdt", folder / "watdiv-100k.hdt")
    (folder / "catalog.toml").write_text('[datasets.watdiv-100k]\npath = "watdiv-100k.hdt"\n')
    rules = yaml.safe_load((ROOT / "charts" / "values" / "prometheus-adapter.yaml").read_text())["rules"]
    (folder / "adapter.yaml").write_text(yaml.safe_dump({"externalRules": rules["external"]}))
    gateway_port, prometheus_port, adapter_port = free_port(), free_port(), free_port()
    scrape = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "gateway", "static_configs": [
            {"targets": [f"127.0.0.1:{gateway_port}"], "labels": {"namespace": NS, "service": GATEWAY_SERVICE}}
        ]}],
    }  # fmt: skip
    (folder / "prometheus.yml").write_text(yaml.safe_dump(scrape))
    kubeconfig = apiserver.env["KUBECONFIG"]
    prometheus = [str(TOOLS / "prometheus"), f"--config.file={folder / 'prometheus.yml'}",
                  f"--storage.tsdb.path={folder / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{prometheus_port}"]  # fmt: skip
    adapter = [str(TOOLS / "prometheus-adapter"), f"--prometheus-url=http://127.0.0.1:{prometheus_port}/",
               f"--config={folder / 'adapter.yaml'}", f"--secure-port={adapter_port}", "--bind-address=127.0.0.1",
               f"--cert-dir={certs}", f"--tls-cert-file={certs / 'tls.crt'}",
               f"--tls-private-key-file={certs / 'tls.key'}", "--metrics-relist-interval=2s",
               f"--lister-kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
               f"--authorization-kubeconfig={kubeconfig}"]  # fmt: skip
    with redis_server() as server:
        client = redis.Redis.from_url(server.url)
        client.xgroup_create(keys.TASKS, keys.GROUP, id="0", mkstream=True)
        env = {**os.environ, "QUANTA_REDIS_URL": server.url, "QUANTA_CATALOG": str(folder / "catalog.toml"),
               "QUANTA_SECRET_KEYS": "hpa:0123456789abcdef0123"}  # fmt: skip
        gateway = [sys.executable, "-m", "quanta.cli.main", "gateway", "--port", str(gateway_port)]
        with (
            background(gateway, folder / "gateway.log", env) as gateway_process,
            background(prometheus, folder / "prometheus.log"),
            background(adapter, folder / "prometheus-adapter.log"),
        ):
            wait_http(f"http://127.0.0.1:{gateway_port}/healthz", gateway_process)
            registered = register_external_metrics(apiserver, "monitoring", "prometheus-adapter", adapter_port,
                                                   certs / "ca.crt")  # fmt: skip
            print(f"\nprometheus-adapter Available as the external metrics API after {registered:.1f} s")
            hpa = "worker.autoscaling.hpa"
            apiserver.helm("install", RELEASE, str(CHART), "-n", NS, "--create-namespace",
                           "--set", "redis.embedded.enabled=false", "--set", f"redis.external.url={server.url}",
                           "--set", f"{hpa}.enabled=true", "--set", f"{hpa}.maxReplicas={MAX}",
                           "--set", f"{hpa}.targetAverageValue={TARGET}",
                           # scale down as soon as the lag drops (Kubernetes' default waits 5 minutes)
                           "--set", f"{hpa}.behavior.scaleDown.stabilizationWindowSeconds=0")  # fmt: skip
            yield Stack(apiserver, client, f"http://127.0.0.1:{prometheus_port}")


def replicas(cluster: Cluster) -> int:
    return int(cluster.get("deployment", HPA, "-n", NS)["spec"].get("replicas", 1))


def wait_replicas(cluster: Cluster, wanted: int, timeout: float) -> float:
    start = time.monotonic()
    while (now := replicas(cluster)) != wanted:
        assert time.monotonic() - start < timeout, f"workers not at {wanted} after {timeout}s: {now}"
        time.sleep(0.1)
    return time.monotonic() - start


def hpa_reading(cluster: Cluster) -> tuple[float | None, int]:
    """What the HPA last read (the external metric per replica) and the replicas it wants."""
    status = cluster.get("hpa", HPA, "-n", NS).get("status", {})
    current = [m["external"]["current"] for m in status.get("currentMetrics") or [] if m["type"] == "External"]
    value = quantity(current[0]["averageValue"]) if current and "averageValue" in current[0] else None
    return value, int(status.get("desiredReplicas", 0))


def scraped(prometheus: str) -> float | None:
    """The gauge as Prometheus last stored it."""
    query = urllib.parse.urlencode({"query": f'{METRIC}{{service="{GATEWAY_SERVICE}"}}'})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query?{query}", timeout=10) as response:
        result = yaml.safe_load(response)["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def lag(client: redis.Redis) -> int:
    groups: Any = client.xinfo_groups(keys.TASKS)
    return int(groups[0]["lag"])


def test_the_hpa_scales_workers_on_the_queue_lag_prometheus_adapter_serves(stack: Stack) -> None:
    cluster, client = stack.cluster, stack.redis
    selector = {"service": GATEWAY_SERVICE}
    seen: list[str] = []

    def read(what: str) -> None:
        value, desired = hpa_reading(cluster)
        served = external_metric(cluster, NS, METRIC, selector)
        seen.append(f"{what}: lag {lag(client)}, Prometheus {scraped(stack.prometheus)}, external metric "
                    f"{served:g}, HPA read {value} per replica, wants {desired}, "
                    f"Deployment {replicas(cluster)}")  # fmt: skip

    deadline = time.monotonic() + 60  # an idle queue: the HPA reads 0 and keeps minReplicas
    while hpa_reading(cluster) != (0.0, 1):
        assert time.monotonic() < deadline, hpa_reading(cluster)
        time.sleep(0.2)
    assert replicas(cluster) == 1
    read("idle")

    for i in range(20):  # lag 20: 4 workers at 5 tasks each, bounded by maxReplicas
        client.xadd(keys.TASKS, {"task": f"t{i}".encode()})
    to_max = wait_replicas(cluster, MAX, timeout=90)
    assert external_metric(cluster, NS, METRIC, selector) == 20  # gateway -> Prometheus -> adapter
    time.sleep(4)  # a few more HPA rounds: never past maxReplicas
    assert replicas(cluster) == MAX
    read(f"20 tasks (1 -> {MAX} in {to_max:.1f} s)")

    answer: Any = client.xreadgroup(keys.GROUP, "w1", {keys.TASKS: ">"}, count=20)  # a worker finishes them all
    for entry_id, _ in answer[0][1]:
        client.xack(keys.TASKS, keys.GROUP, entry_id)
        client.xdel(keys.TASKS, entry_id)
    to_one = wait_replicas(cluster, 1, timeout=90)
    read(f"drained ({MAX} -> 1 in {to_one:.1f} s)")
    assert hpa_reading(cluster)[1] == 1
    print("\n" + "\n".join(seen))
