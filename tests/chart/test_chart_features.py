"""The rendered objects, one class per feature (Airflow's way): off by default first, then on."""

from __future__ import annotations

import base64
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jmespath
import pytest

from quanta.common.catalog import Dataset, Example, default_dataset, load_catalog
from quanta.gateway.config import Settings

from .conftest import CHART, ROOT

KEDA = {"worker": {"autoscaling": {"keda": {"enabled": True}}}}
EXTERNAL = {
    "redis": {
        "embedded": {"enabled": False},
        "external": {
            "url": "rediss://redis.example:6380/2",
            "passwordSecret": "redis-auth",
            "tls": {"secret": "redis-tls", "clientCertificate": True},
        },
    }
}
SENTINEL = {
    "redis": {
        "embedded": {"enabled": False},
        "external": {
            "url": "redis:///1",
            "sentinel": {"enabled": True, "hosts": ["s0:26379", "s1:26379"], "masterName": "q", "passwordSecret": "s"},
        },
    }
}


def env(deployment: dict[str, Any]) -> dict[str, Any]:
    """The first container's env, by name (value, or valueFrom)."""
    items = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in items}


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)


class TestGateway:
    def test_deployment_service_pdb_and_probes_by_default(self, render, one) -> None:
        docs = render()
        gateway = one(docs, "Deployment", "-gateway")
        container = gateway["spec"]["template"]["spec"]["containers"][0]
        assert gateway["spec"]["replicas"] == 2
        assert jmespath.search("readinessProbe.httpGet.path", container) == "/readyz"
        assert jmespath.search("livenessProbe.httpGet.path", container) == "/healthz"
        assert one(docs, "Service", "-gateway")["spec"]["ports"][0]["port"] == 80
        assert one(docs, "PodDisruptionBudget", "-gateway")["spec"]["minAvailable"] == 1
        assert not [d for d in docs if d["kind"] in ("Ingress", "HorizontalPodAutoscaler")]

    def test_settings_reach_the_environment(self, render, one) -> None:
        values = {"gateway": {"settings": {"maxQueue": 50, "replyTimeoutSeconds": 7, "trustForwarded": True}}}
        variables = env(one(render(values), "Deployment", "-gateway"))
        assert (variables["QUANTA_MAX_QUEUE"], variables["QUANTA_REPLY_TIMEOUT_S"]) == ("50", "7")
        assert variables["QUANTA_TRUST_FORWARDED"] == "1"
        assert variables["QUANTA_SECRET_KEYS"] == {
            "secretKeyRef": {"name": "quanta-signing-keys", "key": "QUANTA_SECRET_KEYS"}
        }


class TestGatewayFirstQuantum:
    """gateway.settings.localQuantumMs: the gateway runs a /sparql piece's first quantum itself, so
    it must read the files where the catalog names them (the image's, or the data volume)."""

    VOLUME = {"data": {"source": "volume", "mountPath": "/srv/hdt", "volume": {"existingClaim": "hdt"}}}

    @staticmethod
    def mounts(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
        spec = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        return {m["mountPath"]: {**m, **volumes[m["name"]]} for m in spec["containers"][0]["volumeMounts"]}

    def test_on_by_default_with_the_sample_in_the_gateway_image(self, render, one) -> None:
        docs = render()
        gateway = one(docs, "Deployment", "-gateway")
        variables = env(gateway)
        assert (variables["QUANTA_LOCAL_QUANTUM_MS"], variables["QUANTA_LOCAL_SHARE"]) == ("10", "0.5")
        # data.source=image: the catalog's file is in the image (the Dockerfile's gateway target), no volume
        assert "data" not in {v["name"] for v in gateway["spec"]["template"]["spec"]["volumes"]}
        catalog = tomllib.loads(one(docs, "ConfigMap", "-catalog")["data"]["catalog.toml"])
        assert catalog["datasets"]["watdiv-100k"]["path"] == "/opt/quanta/data/watdiv-100k.hdt"

    def test_settings_reach_the_environment(self, render, one) -> None:
        values = {"gateway": {"settings": {"localQuantumMs": 2.5, "localShare": 0.25}}}
        variables = env(one(render(values), "Deployment", "-gateway"))
        assert (variables["QUANTA_LOCAL_QUANTUM_MS"], variables["QUANTA_LOCAL_SHARE"]) == ("2.5", "0.25")

    def test_the_data_volume_read_only_where_the_catalog_names_the_files(self, render, one) -> None:
        docs = render(self.VOLUME)
        gateway, worker = (self.mounts(one(docs, "Deployment", role)) for role in ("-gateway", "-worker"))
        data = {"name": "data", "mountPath": "/srv/hdt", "readOnly": True,
                "persistentVolumeClaim": {"claimName": "hdt", "readOnly": True}}  # fmt: skip
        assert gateway["/srv/hdt"] == worker["/srv/hdt"] == data
        catalog = tomllib.loads(one(docs, "ConfigMap", "-catalog")["data"]["catalog.toml"])
        assert Path(catalog["datasets"]["watdiv-100k"]["path"]).parent == Path("/srv/hdt")

    def test_off_no_data_volume_on_the_gateway(self, render, one) -> None:
        values = {**self.VOLUME, "gateway": {"settings": {"localQuantumMs": 0}}}
        docs = render(values)
        gateway = one(docs, "Deployment", "-gateway")
        assert env(gateway)["QUANTA_LOCAL_QUANTUM_MS"] == "0"
        assert set(self.mounts(gateway)) == {"/etc/quanta/catalog", "/tmp"}
        assert "/srv/hdt" in self.mounts(one(docs, "Deployment", "-worker"))  # the workers keep theirs

    @pytest.mark.parametrize(
        ("settings", "message"),
        [
            ({"localQuantumMs": -1}, "localQuantumMs': minimum"),
            ({"localQuantumMs": 1001}, "localQuantumMs': maximum"),
            ({"localQuantumMs": "10"}, "localQuantumMs': got string, want number"),
            ({"localShare": 0}, "localShare': exclusiveMinimum"),
            ({"localShare": 1.5}, "localShare': maximum"),
            ({"localShare": -0.5}, "localShare': exclusiveMinimum"),
        ],
    )
    def test_the_schema_refuses_bad_values(self, render_error, settings, message: str) -> None:
        assert message in render_error({"gateway": {"settings": settings}})

    def test_the_schemas_bounds_are_the_gateways(self) -> None:
        """What the schema lets through, the gateway starts with (config.Settings)."""
        schema = json.loads((CHART / "values.schema.json").read_text())
        settings = schema["properties"]["gateway"]["properties"]["settings"]["properties"]
        bounds = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}
        for value, field in (("localQuantumMs", "local_quantum_ms"), ("localShare", "local_share")):
            chart = {bounds[k]: v for k, v in settings[value].items() if k in bounds}
            rules = Settings.__dataclass_fields__[field].metadata
            gateway = {name: rules[name] for name in bounds.values() if name in rules}
            assert chart == gateway, value


class TestGatewayIngress:
    def test_off_by_default(self, render) -> None:
        assert not [d for d in render() if d["kind"] == "Ingress"]

    def test_host_path_class_and_tls(self, render, one) -> None:
        values = {
            "gateway": {"ingress": {"enabled": True, "host": "q.example", "className": "nginx", "tlsSecret": "t"}}
        }
        ingress = one(render(values), "Ingress")
        assert jmespath.search("spec.rules[0].host", ingress) == "q.example"
        assert jmespath.search("spec.tls[0].secretName", ingress) == "t"
        assert jmespath.search("spec.rules[0].http.paths[0].backend.service.name", ingress) == "quanta-gateway"


class TestGatewayAutoscaling:
    def test_off_by_default(self, render) -> None:
        assert not [d for d in render() if d["kind"] == "HorizontalPodAutoscaler"]

    def test_cpu_hpa_and_no_fixed_replicas(self, render, one) -> None:
        docs = render({"gateway": {"autoscaling": {"enabled": True, "targetCPUUtilizationPercentage": 60}}})
        hpa = one(docs, "HorizontalPodAutoscaler", "-gateway")
        assert jmespath.search("spec.metrics[0].resource.target.averageUtilization", hpa) == 60
        assert "replicas" not in one(docs, "Deployment", "-gateway")["spec"]


class TestWorkerKeda:
    def test_off_by_default(self, render, one) -> None:
        docs = render()
        assert not [d for d in docs if d["kind"] in ("ScaledObject", "TriggerAuthentication")]
        assert one(docs, "Deployment", "-worker")["spec"]["replicas"] == 2

    def test_redis_streams_lag_trigger_that_scales_to_zero(self, render, one) -> None:
        docs = render({"worker": {"autoscaling": {"keda": {"enabled": True, "activationLagCount": 3, "lagCount": 9}}}})
        scaled = one(docs, "ScaledObject")
        trigger = scaled["spec"]["triggers"][0]
        assert scaled["spec"]["minReplicaCount"] == 0
        assert trigger["type"] == "redis-streams"
        assert trigger["metadata"] == {
            "address": "quanta-redis:6379", "stream": "quanta:tasks", "consumerGroup": "workers",
            "lagCount": "9", "activationLagCount": "3",
        }  # fmt: skip
        assert "replicas" not in one(docs, "Deployment", "-worker")["spec"]
        assert "authenticationRef" not in trigger
        assert "advanced" not in scaled["spec"]  # the HPA's behavior: Kubernetes' defaults

    def test_the_hpa_behavior_between_one_and_max(self, render, one) -> None:
        behavior = {"scaleDown": {"stabilizationWindowSeconds": 30}}
        keda = {"worker": {"autoscaling": {"keda": {"enabled": True, "behavior": behavior}}}}
        scaled = one(render(keda), "ScaledObject")
        assert jmespath.search("spec.advanced.horizontalPodAutoscalerConfig.behavior", scaled) == behavior

    def test_with_scale_to_zero_the_gateway_stays_ready_without_workers(self, render, one) -> None:
        def readiness(values: dict[str, Any]) -> str:
            gateway = one(render(values), "Deployment", "-gateway")
            return str(jmespath.search("spec.template.spec.containers[0].readinessProbe.httpGet.path", gateway))

        # /readyz needs a live worker: with none left, only a query could bring one back
        assert readiness(KEDA) == "/healthz"
        assert readiness({"worker": {"autoscaling": {"keda": {"enabled": True, "minReplicas": 1}}}}) == "/readyz"

    def test_external_tls_redis_gets_a_trigger_authentication(self, render, one) -> None:
        docs = render(EXTERNAL | KEDA)
        trigger = one(docs, "ScaledObject")["spec"]["triggers"][0]
        assert trigger["metadata"]["address"] == "redis.example:6380"
        assert trigger["metadata"]["databaseIndex"] == "2"
        params = {r["parameter"] for r in one(docs, "TriggerAuthentication")["spec"]["secretTargetRef"]}
        assert params == {"password", "ca", "cert", "key"}

    def test_sentinel_uses_the_sentinel_streams_scaler(self, render, one) -> None:
        trigger = one(render(SENTINEL | KEDA), "ScaledObject")["spec"]["triggers"][0]
        assert trigger["type"] == "redis-sentinel-streams"
        assert (trigger["metadata"]["addresses"], trigger["metadata"]["sentinelMaster"]) == ("s0:26379,s1:26379", "q")


class TestWorkerHpa:
    def test_off_by_default(self, render) -> None:
        assert not [d for d in render() if d["kind"] == "HorizontalPodAutoscaler"]

    def test_external_metric_from_prometheus_adapter(self, render, one) -> None:
        hpa = one(render({"worker": {"autoscaling": {"hpa": {"enabled": True}}}}), "HorizontalPodAutoscaler", "-worker")
        assert jmespath.search("spec.metrics[0].external.metric.name", hpa) == "quanta_queue_lag"
        assert jmespath.search("spec.metrics[0].external.target.averageValue", hpa) == "5"
        assert jmespath.search("spec.metrics[0].external.metric.selector.matchLabels", hpa) == {
            "service": "quanta-gateway"
        }
        assert "behavior" not in hpa["spec"]

    def test_behavior(self, render, one) -> None:
        behavior = {"scaleDown": {"stabilizationWindowSeconds": 0}, "scaleUp": {"selectPolicy": "Max"}}
        hpa = one(render({"worker": {"autoscaling": {"hpa": {"enabled": True, "behavior": behavior}}}}),
                  "HorizontalPodAutoscaler", "-worker")  # fmt: skip
        assert hpa["spec"]["behavior"] == behavior


class TestWorker:
    def test_probes_grace_period_and_settings(self, render, one) -> None:
        worker = one(render({"worker": {"terminationGracePeriodSeconds": 45, "livenessTimeoutSeconds": 90}}),
                     "Deployment", "-worker")  # fmt: skip
        spec = worker["spec"]["template"]["spec"]
        container = spec["containers"][0]
        assert spec["terminationGracePeriodSeconds"] == 45
        assert jmespath.search("livenessProbe.httpGet.path", container) == "/livez"
        assert jmespath.search("readinessProbe.httpGet.path", container) == "/readyz"
        variables = env(worker)
        assert variables["QUANTA_LIVENESS_TIMEOUT_S"] == "90" and variables["QUANTA_METRICS_PORT"] == "9100"
        assert variables["QUANTA_WORKER_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


class TestEmbeddedRedis:
    def test_on_by_default_with_aof_on_a_volume(self, render, one) -> None:
        docs = render()
        redis = one(docs, "StatefulSet", "-redis")
        args = redis["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--appendonly") + 1] == "yes"
        assert jmespath.search("spec.volumeClaimTemplates[0].spec.resources.requests.storage", redis) == "2Gi"
        assert redis["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
        assert env(one(docs, "Deployment", "-worker"))["QUANTA_REDIS_URL"] == "redis://quanta-redis:6379/0"

    def test_without_persistence_an_empty_dir(self, render, one) -> None:
        redis = one(render({"redis": {"embedded": {"persistence": {"enabled": False}}}}), "StatefulSet", "-redis")
        assert "volumeClaimTemplates" not in redis["spec"]
        assert {"name": "data", "emptyDir": {}} in redis["spec"]["template"]["spec"]["volumes"]


class TestExternalRedis:
    def test_off_by_default(self, render) -> None:
        variables = [env(d) for d in render() if d["kind"] == "Deployment"]
        assert all("QUANTA_REDIS_TLS_CA_FILE" not in v for v in variables)

    def test_tls_with_ca_and_client_certificate(self, render, one) -> None:
        docs = render(EXTERNAL)
        assert not [d for d in docs if d["kind"] == "StatefulSet"]
        for role in ("-gateway", "-worker"):
            deployment = one(docs, "Deployment", role)
            variables = env(deployment)
            assert variables["QUANTA_REDIS_URL"] == "rediss://redis.example:6380/2"
            assert variables["QUANTA_REDIS_TLS_CA_FILE"] == "/etc/quanta/redis-tls/ca.crt"
            assert variables["QUANTA_REDIS_TLS_CERT_FILE"] == "/etc/quanta/redis-tls/tls.crt"
            assert variables["QUANTA_REDIS_PASSWORD"] == {"secretKeyRef": {"name": "redis-auth", "key": "password"}}
            volumes = deployment["spec"]["template"]["spec"]["volumes"]
            assert {"name": "redis-tls", "secret": {"secretName": "redis-tls"}} in volumes

    def test_sentinel(self, render, one) -> None:
        variables = env(one(render(SENTINEL), "Deployment", "-worker"))
        assert variables["QUANTA_REDIS_SENTINELS"] == "s0:26379,s1:26379"
        assert variables["QUANTA_REDIS_SENTINEL_MASTER"] == "q"
        assert variables["QUANTA_REDIS_SENTINEL_PASSWORD"]["secretKeyRef"]["key"] == "sentinel-password"


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions with In) selects these labels."""
    plain = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    expressions = selector.get("matchExpressions", [])
    assert all(e["operator"] == "In" for e in expressions)
    return plain and all(labels.get(e["key"]) in e["values"] for e in expressions)


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    return dict(workload["spec"]["template"]["metadata"]["labels"])


def by_name(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


class TestRedisShards:
    """redis.shards: the queue over K Redis servers, each with its own workers (a Deployment per
    shard, on its shard's URL); the gateways list every shard, in order."""

    SHARDS = {"redis": {"shards": 3}}
    URLS = ["redis://quanta-redis:6379/0", "redis://quanta-redis-1:6379/0", "redis://quanta-redis-2:6379/0"]
    EXTERNAL = {
        "redis": {
            "shards": 2,
            "embedded": {"enabled": False},
            "external": {
                "url": "rediss://a.example:6380/2, rediss://b.example:6381/3",
                "passwordSecret": "redis-auth",
                "tls": {"secret": "redis-tls"},
            },
        }
    }

    def test_one_shard_renders_as_before(self, render, one) -> None:
        """The default: one Redis pod behind quanta-redis, one worker Deployment with the
        selector it always had (an upgrade changes no immutable field)."""
        docs = render({"redis": {"shards": 1}, **KEDA})
        assert kinds(docs) == kinds(render(KEDA))
        assert one(docs, "StatefulSet")["spec"]["replicas"] == 1
        assert sorted(by_name(docs, "Service")) == ["quanta-gateway", "quanta-redis"]
        assert one(docs, "Service", "-redis")["spec"]["selector"] == {
            "app.kubernetes.io/name": "quanta", "app.kubernetes.io/instance": "quanta",
            "app.kubernetes.io/component": "redis",
        }  # fmt: skip
        worker = one(docs, "Deployment", "-worker")
        assert worker["metadata"]["name"] == "quanta-worker"
        assert set(worker["spec"]["selector"]["matchLabels"]) == {
            "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
        }  # fmt: skip
        assert "quanta.io/shard" not in pod_labels(worker)
        assert env(worker)["QUANTA_REDIS_URL"] == env(one(docs, "Deployment", "-gateway"))["QUANTA_REDIS_URL"]
        assert one(docs, "ScaledObject")["spec"]["scaleTargetRef"] == {"name": "quanta-worker"}

    def test_embedded_one_redis_pod_and_service_per_shard(self, render, one) -> None:
        docs = render(self.SHARDS)
        redis = one(docs, "StatefulSet", "-redis")
        assert redis["spec"]["replicas"] == 3
        # the serviceName is immutable: the one it always had, whatever the shard count
        assert redis["spec"]["serviceName"] == "quanta-redis"
        assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"  # a volume per pod
        services = {n: s for n, s in by_name(docs, "Service").items() if "redis" in n}
        assert sorted(services) == ["quanta-redis", "quanta-redis-1", "quanta-redis-2"]
        # the pods' labels, as the StatefulSet controller gives them
        pods = [{**pod_labels(redis), "statefulset.kubernetes.io/pod-name": f"quanta-redis-{i}"} for i in range(3)]
        for i, url in enumerate(self.URLS):
            # shard i's URL names a Service that selects the StatefulSet's pod i, and only it
            selector = {"matchLabels": services[url.split("//")[1].split(":")[0]]["spec"]["selector"]}
            assert [j for j, labels in enumerate(pods) if matches(selector, labels)] == [i]

    def test_a_worker_deployment_per_shard_on_its_shards_url(self, render, one) -> None:
        docs = render(self.SHARDS)
        workers = {n: d for n, d in by_name(docs, "Deployment").items() if "-worker" in n}
        assert sorted(workers) == ["quanta-worker-0", "quanta-worker-1", "quanta-worker-2"]
        for i, url in enumerate(self.URLS):
            worker = workers[f"quanta-worker-{i}"]
            assert env(worker)["QUANTA_REDIS_URL"] == url
            assert worker["spec"]["selector"]["matchLabels"]["quanta.io/shard"] == str(i)
            assert worker["spec"]["replicas"] == 2  # worker.replicas is per shard
        # no two Deployments' selectors overlap
        for name, worker in workers.items():
            selecting = [n for n, d in workers.items() if matches(d["spec"]["selector"], pod_labels(worker))]
            assert selecting == [name]
        assert env(one(docs, "Deployment", "-gateway"))["QUANTA_REDIS_URL"] == ",".join(self.URLS)

    def test_keda_a_scaled_object_per_shard_on_its_shards_stream(self, render) -> None:
        docs = render({**self.SHARDS, **KEDA})
        scaled = by_name(docs, "ScaledObject")
        assert sorted(scaled) == ["quanta-worker-0", "quanta-worker-1", "quanta-worker-2"]
        for i, address in enumerate(["quanta-redis:6379", "quanta-redis-1:6379", "quanta-redis-2:6379"]):
            spec = scaled[f"quanta-worker-{i}"]["spec"]
            assert spec["scaleTargetRef"] == {"name": f"quanta-worker-{i}"}
            assert spec["triggers"][0]["metadata"]["address"] == address
            assert "databaseIndex" not in spec["triggers"][0]["metadata"]
        assert "replicas" not in by_name(docs, "Deployment")["quanta-worker-1"]["spec"]

    def test_hpa_a_shards_workers_follow_its_own_series(self, render) -> None:
        docs = render({"redis": {"shards": 2}, "worker": {"autoscaling": {"hpa": {"enabled": True}}}})
        hpas = by_name(docs, "HorizontalPodAutoscaler")
        assert sorted(hpas) == ["quanta-worker-0", "quanta-worker-1"]
        for i in range(2):
            spec = hpas[f"quanta-worker-{i}"]["spec"]
            assert spec["scaleTargetRef"]["name"] == f"quanta-worker-{i}"
            assert jmespath.search("metrics[0].external.metric.selector.matchLabels", spec) == {
                "service": "quanta-gateway", "shard": str(i),
            }  # fmt: skip

    def test_a_disruption_budget_per_deployment(self, render) -> None:
        docs = render({"redis": {"shards": 2}, "worker": {"podDisruptionBudget": {"enabled": True}}})
        budgets = by_name(docs, "PodDisruptionBudget")
        workers = {n: d for n, d in by_name(docs, "Deployment").items() if "-worker" in n}
        assert sorted(n for n in budgets if "-worker" in n) == sorted(workers) == ["quanta-worker-0", "quanta-worker-1"]
        for name, worker in workers.items():
            assert budgets[name]["spec"]["selector"] == worker["spec"]["selector"]

    def test_external_one_url_per_shard(self, render, one) -> None:
        docs = render({**self.EXTERNAL, **KEDA})
        assert not [d for d in docs if d["kind"] == "StatefulSet"]
        assert list(by_name(docs, "Service")) == ["quanta-gateway"]
        gateway = env(one(docs, "Deployment", "-gateway"))
        assert gateway["QUANTA_REDIS_URL"] == "rediss://a.example:6380/2,rediss://b.example:6381/3"
        scaled = by_name(docs, "ScaledObject")
        for i, (url, address, db) in enumerate([("rediss://a.example:6380/2", "a.example:6380", "2"),
                                                ("rediss://b.example:6381/3", "b.example:6381", "3")]):  # fmt: skip
            variables = env(one(docs, "Deployment", f"-worker-{i}"))
            assert variables["QUANTA_REDIS_URL"] == url
            # the connection settings apply to every shard
            assert variables["QUANTA_REDIS_PASSWORD"] == gateway["QUANTA_REDIS_PASSWORD"]
            assert variables["QUANTA_REDIS_TLS_CA_FILE"] == "/etc/quanta/redis-tls/ca.crt"
            metadata = scaled[f"quanta-worker-{i}"]["spec"]["triggers"][0]["metadata"]
            assert (metadata["address"], metadata["databaseIndex"]) == (address, db)
            assert scaled[f"quanta-worker-{i}"]["spec"]["triggers"][0]["authenticationRef"] == {"name": "quanta-redis"}
        one(docs, "TriggerAuthentication")  # one, shared by the shards

    def test_network_policies_let_every_worker_and_gateway_reach_every_redis_pod(self, render, one) -> None:
        docs = render(self.SHARDS)
        redis = pod_labels(one(docs, "StatefulSet", "-redis"))  # every pod's, whatever its shard
        redis_policy, worker_policy = one(docs, "NetworkPolicy", "-redis"), one(docs, "NetworkPolicy", "-worker")
        assert matches(redis_policy["spec"]["podSelector"], redis)
        allowed = redis_policy["spec"]["ingress"][0]["from"][0]["podSelector"]
        for name, deployment in by_name(docs, "Deployment").items():
            assert matches(allowed, pod_labels(deployment)), name
            if "-worker" in name:
                assert matches(worker_policy["spec"]["podSelector"], pod_labels(deployment)), name
                assert matches(worker_policy["spec"]["egress"][1]["to"][0]["podSelector"], redis)


class TestCatalogAndData:
    def catalog(self, render: Any, one: Any, values: dict[str, Any], tmp_path: Path) -> dict[str, Dataset]:
        """The rendered catalog, as the service reads it."""
        path = tmp_path / "catalog.toml"
        path.write_text(one(render(values), "ConfigMap", "-catalog")["data"]["catalog.toml"])
        return load_catalog(path)

    def test_every_key_of_the_services_catalog_is_a_value(self) -> None:
        """The chart takes whatever the service's catalog takes (camelCase), so nothing is
        out of reach on Kubernetes."""
        schema = json.loads((CHART / "values.schema.json").read_text())
        keys = set(schema["properties"]["catalog"]["additionalProperties"]["properties"])
        fields = {re.sub(r"_(.)", lambda m: m.group(1).upper(), f) for f in Dataset.__dataclass_fields__}
        assert keys == fields - {"name"}

    def test_the_samples_example_queries_by_default(self, render, one, tmp_path: Path) -> None:
        """The query page on Kubernetes offers the sample's examples, as `quanta up` does."""
        sample = self.catalog(render, one, {}, tmp_path)["watdiv-100k"]
        examples = tomllib.loads((ROOT / "data" / "watdiv-100k.examples.toml").read_text())["example"]
        assert [(e.name, e.query) for e in sample.examples] == [(e["name"], e["query"]) for e in examples]

    def test_named_graphs_default_page_bytes_and_examples(self, render, one, tmp_path: Path) -> None:
        base = {"quantumMs": 75, "maxResults": 100, "planMode": "auto", "planThresholdBytes": 0}
        extra = "http://example.org/graphs/extra"
        dataset = {**base, "path": "d.hdt", "maxPageBytes": 65536, "default": True,
                   "graphs": {extra: "extra.hdt", "urn:x:other": "/mnt/other.hdt"},
                   "examples": [{"name": 'a "quoted" one', "query": "SELECT * WHERE {\n  ?s ?p ?o\n}\n"}]}  # fmt: skip
        values = {"catalog": {"first": {**base, "path": "f.hdt"}, "d": dataset}, "tests": {"dataset": "d"}}
        catalog = self.catalog(render, one, values, tmp_path)
        d = catalog["d"]
        assert default_dataset(catalog) is d and d.max_page_bytes == 65536
        assert d.graph(extra) == Path("/opt/quanta/data/extra.hdt") and d.graph("urn:x:other") == Path("/mnt/other.hdt")
        assert d.examples == (Example('a "quoted" one', "SELECT * WHERE {\n  ?s ?p ?o\n}\n"),)
        assert default_dataset(self.catalog(render, one, {}, tmp_path)).name == "watdiv-100k"

    def test_the_sample_from_the_worker_image_by_default(self, render, one) -> None:
        docs = render()
        catalog = tomllib.loads(one(docs, "ConfigMap", "-catalog")["data"]["catalog.toml"])
        assert catalog["datasets"]["watdiv-100k"]["path"] == "/opt/quanta/data/watdiv-100k.hdt"
        assert catalog["datasets"]["watdiv-100k"]["quantum_ms"] == 75
        assert not [d for d in docs if d["kind"] in ("PersistentVolumeClaim", "Job")]

    def test_infinite_quantum_and_backend(self, render, one) -> None:
        dataset = {"path": "/mnt/d.hdt", "quantumMs": "inf", "maxResults": 10, "planMode": "value",
                   "planThresholdBytes": 0, "backend": "pyhdt"}  # fmt: skip
        text = one(render({"catalog": {"d": dataset}, "tests": {"dataset": "d"}}), "ConfigMap", "-catalog")["data"]
        catalog = tomllib.loads(text["catalog.toml"])["datasets"]["d"]
        assert (
            catalog["quantum_ms"] == float("inf") and catalog["backend"] == "pyhdt" and catalog["path"] == "/mnt/d.hdt"
        )

    def test_a_read_only_volume_and_a_loader_job(self, render, one) -> None:
        values = {
            "data": {"source": "volume", "volume": {"accessModes": ["ReadWriteMany"]}},
            "loader": {"enabled": True, "jobs": [{"dataset": "watdiv-100k", "inputs": ["dumps/w.nt.gz"]}]},
        }
        docs = render(values)
        claim = one(docs, "PersistentVolumeClaim")
        assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        mounts = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "data", "mountPath": "/opt/quanta/data", "readOnly": True} in mounts
        loader = one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]
        assert loader["args"] == [
            "/opt/quanta/data/dumps/w.nt.gz", "--output", "/opt/quanta/data/watdiv-100k.hdt",
        ]  # fmt: skip
        assert {"name": "QUANTA_LOG_FORMAT", "value": "json"} in loader["env"]  # skips and errors as JSON lines


class TestSigningKeys:
    def test_generated_when_none_given(self, render, one) -> None:
        secret = one(render(), "Secret", "-signing-keys")
        kid, _, key = base64.b64decode(secret["data"]["QUANTA_SECRET_KEYS"]).decode().partition(":")
        assert kid == "k1" and len(key) == 43

    def test_given_keys_in_order_first_signs(self, render, one) -> None:
        keys = [{"id": "k2", "secret": "n" * 20}, {"id": "k1", "secret": "o" * 20}]
        secret = one(render({"signingKeys": {"keys": keys}}), "Secret", "-signing-keys")
        assert base64.b64decode(secret["data"]["QUANTA_SECRET_KEYS"]).decode() == f"k2:{'n' * 20},k1:{'o' * 20}"

    def test_an_existing_secret_is_used_not_made(self, render, one) -> None:
        docs = render({"signingKeys": {"existingSecret": "mine"}})
        assert not [d for d in docs if d["kind"] == "Secret"]
        assert env(one(docs, "Deployment", "-gateway"))["QUANTA_SECRET_KEYS"]["secretKeyRef"]["name"] == "mine"


class TestMonitoring:
    def test_off_by_default(self, render) -> None:
        assert not [d for d in render() if d["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule")]

    def test_monitors_and_rules_carry_the_selector_labels(self, render, one) -> None:
        on = {"enabled": True}
        values = {"monitoring": {"labels": {"release": "kps"}, "serviceMonitor": on, "podMonitor": on,
                                 "prometheusRule": on}}  # fmt: skip
        docs = render(values)
        for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
            assert one(docs, kind)["metadata"]["labels"]["release"] == "kps", kind
        assert jmespath.search("spec.podMetricsEndpoints[0].port", one(docs, "PodMonitor")) == "metrics"
        assert jmespath.search("spec.endpoints[0].port", one(docs, "ServiceMonitor")) == "http"


class TestNetworkPolicy:
    def test_workers_reach_only_redis_and_dns(self, render, one) -> None:
        policy = one(render(), "NetworkPolicy", "-worker")
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
        to = jmespath.search("spec.egress[1].to[0].podSelector.matchLabels", policy)
        assert to["app.kubernetes.io/component"] == "redis"
        assert [p["port"] for p in policy["spec"]["egress"][0]["ports"]] == [53, 53]

    def test_redis_takes_only_the_release(self, render, one) -> None:
        policy = one(render(), "NetworkPolicy", "-redis")
        selector = jmespath.search("spec.ingress[0].from[0].podSelector.matchExpressions[1]", policy)
        assert selector["values"] == ["gateway", "worker", "loader"]

    def test_can_be_turned_off(self, render) -> None:
        assert not [d for d in render({"networkPolicy": {"enabled": False}}) if d["kind"] == "NetworkPolicy"]


class TestSecurity:
    @pytest.mark.parametrize("values", [{}, KEDA | {"loader": {}}], ids=["defaults", "keda"])
    def test_every_pod_is_restricted(self, render, values) -> None:
        for doc in render(values):
            spec = jmespath.search("spec.template.spec", doc) or (doc["spec"] if doc["kind"] == "Pod" else None)
            if spec is None:
                continue
            name = doc["metadata"]["name"]
            assert spec["securityContext"]["runAsNonRoot"] is True, name
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert spec["automountServiceAccountToken"] is False, name
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
                assert context["capabilities"] == {"drop": ["ALL"]}, name
                assert container["resources"]["limits"]["memory"], name

    def test_host_network_only_when_asked(self, render) -> None:
        def host(docs: list[dict[str, Any]]) -> set[bool]:
            return {
                bool(jmespath.search("spec.template.spec.hostNetwork", d)) for d in docs if d["kind"] == "Deployment"
            }

        assert host(render()) == {False}
        assert host(render({"hostNetwork": True, "gateway": {"port": 18000}, "worker": {"metricsPort": 19100}})) == {
            True
        }


class TestHelmTest:
    def test_a_query_pod_hook(self, render, one) -> None:
        pod = one(render(), "Pod", "-test-query")
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        args = pod["spec"]["containers"][0]["args"]
        assert args[1] == "http://quanta-gateway:80/sparql/watdiv-100k" and args[3] == "3"
        assert "application/sparql-results+json" in args[0]
