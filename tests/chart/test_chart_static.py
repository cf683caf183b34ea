"""helm lint; the values matrix renders and validates; the schema refuses unknown keys;
impossible combinations fail at render with a message naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXTERNAL_TLS_SENTINEL = {
    "redis": {
        "embedded": {"enabled": False},
        "external": {
            "url": "rediss://:@redis.example:6380/2",
            "passwordSecret": "redis-auth",
            "tls": {"secret": "redis-tls", "clientCertificate": True},
            "sentinel": {
                "enabled": True,
                "hosts": ["s1.example:26379", "s2.example:26379"],
                "passwordSecret": "s-auth",
            },
        },
    }
}
# an HPA behavior: kubeconform checks it against the HPA's and the ScaledObject's schemas
SCALE_DOWN = {
    "scaleDown": {"stabilizationWindowSeconds": 60, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}
}
MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "keda": {"worker": {"autoscaling": {"keda": {"enabled": True}}}},
    "hpa": {"worker": {"autoscaling": {"hpa": {"enabled": True, "behavior": SCALE_DOWN}}}},
    "external-redis-tls-sentinel": {
        **EXTERNAL_TLS_SENTINEL,
        "worker": {"autoscaling": {"keda": {"enabled": True}}},
    },
    "ingress": {"gateway": {"ingress": {"enabled": True, "host": "sparql.example", "tlsSecret": "sparql-tls"}}},
    "shards-embedded-keda": {
        "redis": {"shards": 3},
        "worker": {"podDisruptionBudget": {"enabled": True}, "autoscaling": {"keda": {"enabled": True}}},
    },
    "shards-external-hpa": {
        "redis": {
            "shards": 2,
            "embedded": {"enabled": False},
            "external": {"url": "rediss://a.example:6380/0,rediss://b.example:6380/0", "tls": {"secret": "redis-tls"}},
        },
        "worker": {"podDisruptionBudget": {"enabled": True}, "autoscaling": {"hpa": {"enabled": True}}},
    },
    "everything": {
        "gateway": {"autoscaling": {"enabled": True}, "ingress": {"enabled": True, "host": "sparql.example"}},
        "worker": {
            "podDisruptionBudget": {"enabled": True},
            "autoscaling": {"keda": {"enabled": True, "behavior": SCALE_DOWN}},
        },
        "monitoring": {
            "labels": {"release": "kube-prometheus-stack"},
            "serviceMonitor": {"enabled": True},
            "podMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True},
            "dashboards": {"enabled": True},
        },
        "data": {"source": "volume", "volume": {"accessModes": ["ReadWriteMany"]}},
        "loader": {"enabled": True, "jobs": [{"dataset": "watdiv-100k", "inputs": ["dumps/watdiv.nt.gz"]}]},
        "signingKeys": {"keys": [{"id": "k2", "secret": "s" * 32}, {"id": "k1", "secret": "t" * 32}]},
    },
}


CHART = Path(__file__).resolve().parents[2] / "charts" / "quanta"


def test_helm_lint_passes_in_strict_mode(helm: Path) -> None:
    done = subprocess.run([str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_the_values_matrix_renders_valid_objects(render, name: str) -> None:
    docs = render(MATRIX[name])  # kubeconform -strict runs inside render
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount"} <= kinds


DATASET = {"path": "d.hdt", "quantumMs": 1, "maxResults": 1, "planMode": "auto", "planThresholdBytes": 1}


def external(url: str, shards: int | None = None, **more: Any) -> dict[str, Any]:
    """Values for an external Redis at `url` (a comma-separated list: one URL per shard)."""
    redis: dict[str, Any] = {"embedded": {"enabled": False}, "external": {"url": url, **more}}
    return {"redis": redis if shards is None else {**redis, "shards": shards}}


SENTINELS = {"enabled": True, "hosts": ["s:26379"]}


@pytest.mark.parametrize(
    "values",
    [
        {"gatway": {}},
        {"gateway": {"replica": 2}},
        {"worker": {"autoscaling": {"keda": {"lagcount": 3}}}},
        {"redis": {"external": {"tls": {"ca": "x"}}}},
        {"monitoring": {"dashboards": {"enable": True}}},
        {"catalog": {"watdiv-100k": {"maxPageByte": 1}}},
        {"catalog": {"watdiv-100k": {"examples": [{"name": "n", "query": "q", "title": "t"}]}}},
    ],
)
def test_the_schema_refuses_unknown_keys(render_error, values: dict[str, Any]) -> None:
    assert "additional properties" in render_error(values).lower()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"worker": {"autoscaling": {"keda": {"enabled": True}, "hpa": {"enabled": True}}}}, "exactly one autoscaler"),
        ({"worker": {"autoscaling": {"hpa": {"enabled": True, "minReplicas": 0}}}}, "cannot scale to zero"),
        ({"redis": {"external": {"url": "redis://r:6379/0"}}}, "set redis.embedded.enabled=false"),
        ({"redis": {"embedded": {"enabled": False}}}, "no redis.external.url"),
        (
            {"redis": {"embedded": {"enabled": False}, "external": {"url": "redis://r:6379", "tls": {"secret": "t"}}}},
            "not rediss://",
        ),
        (
            {
                "redis": {
                    "embedded": {"enabled": False},
                    "external": {"url": "redis://r:6379", "sentinel": {"enabled": True}},
                }
            },
            "sentinel.hosts",
        ),
        ({"loader": {"enabled": True}}, "set data.source=volume"),
        (
            {
                "data": {"source": "volume"},
                "loader": {"enabled": True, "jobs": [{"dataset": "watdiv-100k", "inputs": ["x.nt"]}]},
            },
            "ReadWriteMany",
        ),
        (
            {
                "data": {"source": "volume", "volume": {"accessModes": ["ReadWriteMany"]}},
                "loader": {"enabled": True, "jobs": [{"dataset": "nope", "inputs": ["x.nt"]}]},
            },
            '"nope" is not in the catalog',
        ),
        ({"hostNetwork": True, "worker": {"metricsPort": 8000}}, "must differ"),
        ({"tests": {"dataset": "missing"}}, "tests.dataset"),
        ({"signingKeys": {"keys": [{"id": "k1", "secret": "short"}]}}, "minLength"),
        (
            {"catalog": {"w": {**DATASET, "quantumMs": 0}}},
            "quantumMs",
        ),
        # (helm's schema error names a wrong path for a property name: match the name and the rule)
        ({"catalog": {"watdiv-100k": {"graphs": {"not an IRI": "g.hdt"}}}}, "'not an IRI' does not match pattern"),
        (
            {
                "catalog": {name: {**DATASET, "path": f"{name}.hdt", "default": True} for name in "ab"},
                "tests": {"dataset": "a"},
            },
            "several datasets have default: true (a, b)",
        ),
        # redis.shards: each shard a Redis of its own, known by its address
        ({"redis": {"shards": 0}}, "at '/redis/shards': minimum: got 0, want 1"),
        ({"redis": {"shards": "2"}}, "at '/redis/shards': got string, want integer"),
        (
            external("redis://a:6379/0,redis://b:6379/0"),
            "redis.shards is 1 but redis.external.url lists 2 (one Redis URL per shard, comma-separated):"
            " set redis.shards=2 or list 1 URLs",
        ),
        (external("redis://a:6379/0", shards=3), "redis.shards is 3 but redis.external.url lists 1"),
        (external("redis://a:6379/0,redis://a:6379/0", shards=2), "lists one Redis URL twice"),
        (external("redis://a:6379/0,http://b:6379/0", shards=2), "url (shard 1) is not a redis:// or rediss:// URL"),
        (
            external("rediss://a:6380/0,redis://b:6379/0", shards=2, tls={"secret": "t"}),
            "redis.external.tls.secret is set but redis.external.url (shard 1) is not rediss://",
        ),
        (
            external("redis:///0,redis:///1", shards=2, sentinel=SENTINELS),
            "redis.shards > 1 does not work with redis.external.sentinel",
        ),
        (
            {"redis": {"shards": 2, "embedded": {"enabled": False}, "external": {"urlSecret": "urls"}}},
            "redis.shards > 1 cannot take the URLs from redis.external.urlSecret (each shard's workers need their own"
            " URL): list them in redis.external.url, comma-separated, and put the password in"
            " redis.external.passwordSecret",
        ),
        (
            {"redis": {"shards": 2}, "hostNetwork": True, "gateway": {"port": 18000}},
            "redis.shards > 1 needs the pod network",
        ),
    ],
)
def test_impossible_combinations_fail_with_a_clear_message(render_error, values, message: str) -> None:
    assert message in render_error(values)


def test_the_schema_is_what_its_generator_writes() -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "k8s" / "values_schema.py"
    written = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    assert written == (CHART / "values.schema.json").read_text()
