"""Tier 3: the chart against a real API server (kwok runs the pods): install --wait with defaults
and with KEDA, server-side dry runs of the rendered objects, upgrade, rollback, uninstall."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CHART = str(ROOT / "charts" / "quanta")
MONITORED = [
    arg
    for key in ("serviceMonitor", "podMonitor", "prometheusRule", "dashboards")
    for arg in ("--set", f"monitoring.{key}.enabled=true")
]


def test_install_with_defaults_waits_for_every_pod(apiserver) -> None:
    apiserver.helm("install", "plain", CHART, "-n", "plain", "--create-namespace", "--wait", "--timeout", "2m")
    deployments = apiserver.get("deployments", "-n", "plain")["items"]
    assert {d["metadata"]["name"]: d["status"].get("readyReplicas") for d in deployments} == {
        "plain-quanta-gateway": 2,
        "plain-quanta-worker": 2,
    }
    redis = apiserver.get("statefulset", "plain-quanta-redis", "-n", "plain")
    assert redis["status"]["readyReplicas"] == 1
    claim = apiserver.get("pvc", "data-plain-quanta-redis-0", "-n", "plain")
    assert claim["status"]["phase"] == "Bound"  # the AOF volume
    assert not apiserver.get("scaledobjects", "-n", "plain")["items"]  # KEDA off by default


def test_install_with_keda_and_monitoring(apiserver) -> None:
    apiserver.helm("install", "scaled", CHART, "-n", "scaled", "--create-namespace", "--wait", "--timeout", "2m",
                   "--set", "worker.autoscaling.keda.enabled=true", *MONITORED)  # fmt: skip
    scaled = apiserver.get("scaledobject", "scaled-quanta-worker", "-n", "scaled")
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "redis-streams" and trigger["metadata"]["lagCount"] == "5"
    assert scaled["spec"]["minReplicaCount"] == 0
    for kind in ("servicemonitor", "podmonitor", "prometheusrule"):
        assert len(apiserver.get(kind, "-n", "scaled")["items"]) == 1, kind
    dashboards = apiserver.get("configmaps", "-n", "scaled", "-l", "grafana_dashboard=1")["items"]
    assert len(dashboards) == 2


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["--set", "worker.autoscaling.hpa.enabled=true", "--set", "gateway.ingress.enabled=true",
         "--set", "gateway.ingress.host=sparql.example", "--set", "gateway.autoscaling.enabled=true"],
        ["-f", str(ROOT / "tests" / "cluster" / "values-external-redis.yaml"), *MONITORED],
    ],
    ids=["defaults", "hpa-ingress", "external-redis-keda-monitoring"],
)  # fmt: skip
def test_the_api_server_accepts_every_rendered_object(apiserver, values: list[str]) -> None:
    apiserver.kubectl("create", "namespace", "dry", check=False)
    # the (helm test) Pod is admitted only once its service account exists: create that one for real
    account = apiserver.helm("template", "dry", CHART, "-n", "dry", "--show-only", "templates/serviceaccount.yaml")
    apiserver.kubectl("apply", "-n", "dry", "-f", "-", stdin=account)
    manifests = apiserver.helm("template", "dry", CHART, "-n", "dry", *values)
    out = apiserver.kubectl("apply", "--dry-run=server", "-n", "dry", "-f", "-", stdin=manifests)
    assert "(server dry run)" in out


def test_the_api_server_refuses_an_unknown_field(apiserver) -> None:
    manifests = apiserver.helm(
        "template", "dry", CHART, "-n", "dry", "--show-only", "templates/gateway/gateway-deployment.yaml"
    )
    broken = manifests.replace("terminationGracePeriodSeconds:", "terminationGracePeriodSecond:")
    out = apiserver.kubectl("apply", "--dry-run=server", "-n", "dry", "-f", "-", stdin=broken, check=False)
    assert "strict decoding error" in out and "terminationGracePeriodSecond" in out


def test_upgrade_keeps_the_signing_key_and_rollback_restores(apiserver) -> None:
    args = ["-n", "upgrade", "--wait", "--timeout", "2m"]
    apiserver.helm("install", "up", CHART, "--create-namespace", *args)
    key = apiserver.get("secret", "up-quanta-signing-keys", "-n", "upgrade")["data"]["QUANTA_SECRET_KEYS"]
    apiserver.helm("upgrade", "up", CHART, *args, "--set", "gateway.replicas=3", "--set", "worker.replicas=1")
    assert apiserver.get("deployment", "up-quanta-gateway", "-n", "upgrade")["spec"]["replicas"] == 3
    assert apiserver.get("deployment", "up-quanta-worker", "-n", "upgrade")["status"]["readyReplicas"] == 1
    # a generated key survives upgrades: plans signed before still resume
    assert apiserver.get("secret", "up-quanta-signing-keys", "-n", "upgrade")["data"]["QUANTA_SECRET_KEYS"] == key
    apiserver.helm("rollback", "up", "1", *args)
    assert apiserver.get("deployment", "up-quanta-gateway", "-n", "upgrade")["spec"]["replicas"] == 2
    history = json.loads(apiserver.helm("history", "up", "-n", "upgrade", "-o", "json"))
    assert [h["status"] for h in history] == ["superseded", "superseded", "deployed"]


def test_a_release_on_one_shard_upgrades_to_two_and_back(apiserver) -> None:
    """redis.shards: a Redis pod (its own volume and Service) and a worker Deployment and ScaledObject
    per shard. Going from one shard to two changes no immutable field (the StatefulSet keeps its
    serviceName), and shard 1's Service reaches pod 1 only (the controller's pod-name label)."""
    args = ["-n", "sharded", "--wait", "--timeout", "2m", "--set", "worker.autoscaling.keda.enabled=true"]

    def deployments() -> dict[str, int]:
        """Each Deployment's pods of its current template, not readyReplicas: a Deployment rolled by
        the upgrade (the gateway: its Redis URLs) may still count an old pod."""
        return {d["metadata"]["name"]: d["status"].get("updatedReplicas", 0)
                for d in apiserver.get("deployments", "-n", "sharded")["items"]}  # fmt: skip

    def rolled_out(expected: dict[str, int]) -> None:
        """helm --wait returns once enough pods are ready, which can be before the last pod of a
        rolled Deployment is updated (seen: the gateway at 1 of 2): waited for."""
        apiserver.wait_until(lambda: deployments() == expected, what=f"deployments {expected}")

    def scaled() -> dict[str, str]:
        return {s["metadata"]["name"]: s["spec"]["triggers"][0]["metadata"]["address"]
                for s in apiserver.get("scaledobjects", "-n", "sharded")["items"]}  # fmt: skip

    apiserver.helm("install", "sh", CHART, "--create-namespace", *args)
    rolled_out({"sh-quanta-gateway": 2, "sh-quanta-worker": 1})
    apiserver.helm("upgrade", "sh", CHART, *args, "--set", "redis.shards=2")
    rolled_out({"sh-quanta-gateway": 2, "sh-quanta-worker-0": 1, "sh-quanta-worker-1": 1})
    assert scaled() == {"sh-quanta-worker-0": "sh-quanta-redis:6379", "sh-quanta-worker-1": "sh-quanta-redis-1:6379"}
    assert apiserver.get("statefulset", "sh-quanta-redis", "-n", "sharded")["status"]["readyReplicas"] == 2
    for i in range(2):
        assert apiserver.get("pvc", f"data-sh-quanta-redis-{i}", "-n", "sharded")["status"]["phase"] == "Bound"

    def endpoints(service: str) -> list[str]:
        slices = apiserver.get("endpointslices", "-n", "sharded", "-l", f"kubernetes.io/service-name={service}")
        return sorted(e["targetRef"]["name"] for s in slices["items"] for e in s.get("endpoints") or [])

    for service, pod in (("sh-quanta-redis", "sh-quanta-redis-0"), ("sh-quanta-redis-1", "sh-quanta-redis-1")):
        apiserver.wait_until(lambda: endpoints(service) == [pod], what=f"{service} -> {pod}")  # noqa: B023
    apiserver.helm("upgrade", "sh", CHART, *args, "--set", "redis.shards=1")
    rolled_out({"sh-quanta-gateway": 2, "sh-quanta-worker": 1})
    assert scaled() == {"sh-quanta-worker": "sh-quanta-redis:6379"}
    apiserver.wait_until(lambda: endpoints("sh-quanta-redis") == ["sh-quanta-redis-0"], what="one Redis pod left")


def test_uninstall_leaves_nothing_behind(apiserver) -> None:
    apiserver.helm("install", "gone", CHART, "-n", "gone", "--create-namespace", "--wait", "--timeout", "2m",
                   "--set", "worker.autoscaling.keda.enabled=true",
                   "--set", "redis.embedded.persistence.retainOnUninstall=false", *MONITORED)  # fmt: skip
    assert owned(apiserver, "gone")
    apiserver.helm("uninstall", "gone", "-n", "gone", "--wait", "--timeout", "2m")
    deadline = time.monotonic() + 60
    while owned(apiserver, "gone") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert owned(apiserver, "gone") == []


def owned(apiserver, namespace: str) -> list[str]:
    """Every object in the namespace that the release made (by its instance label), of every listable kind."""
    kinds = apiserver.kubectl("api-resources", "--verbs=list", "--namespaced", "-o", "name").split()
    kinds = [k for k in kinds if k not in ("events", "events.events.k8s.io")]
    out = apiserver.kubectl(
        "get", ",".join(kinds), "-n", namespace, "-l", "app.kubernetes.io/instance=gone", "-o", "name"
    )
    return [line for line in out.splitlines() if "/" in line and " " not in line]  # not kubectl's warnings
