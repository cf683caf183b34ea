"""Write charts/quanta/values.schema.json (strict: additionalProperties false everywhere).

    python scripts/k8s/values_schema.py > charts/quanta/values.schema.json

tests/chart checks that the committed schema is what this prints.
"""

from __future__ import annotations

import json
from typing import Any

Schema = dict[str, Any]


def obj(props: dict[str, Schema], desc: str | None = None, **kw: Any) -> Schema:
    d: Schema = {"type": "object", "additionalProperties": False, "properties": props}
    if desc:
        d["description"] = desc
    d.update(kw)
    return d


def s(desc: str, **kw: Any) -> Schema:
    return {"type": "string", "description": desc, **kw}


def i(desc: str, minimum: int | None = None, **kw: Any) -> Schema:
    d: Schema = {"type": "integer", "description": desc, **kw}
    if minimum is not None:
        d["minimum"] = minimum
    return d


def n(desc: str, **kw: Any) -> Schema:
    return {"type": "number", "description": desc, **kw}


def b(desc: str) -> Schema:
    return {"type": "boolean", "description": desc}


def free(desc: str) -> Schema:
    return {"type": "object", "description": desc}


def strmap(desc: str) -> Schema:
    return {"type": "object", "description": desc, "additionalProperties": {"type": "string"}}


def arr(desc: str, items: Schema | None = None) -> Schema:
    return {"type": "array", "description": desc, **({"items": items} if items else {})}


def image(desc: str) -> Schema:
    return obj(
        {
            "repository": s("image repository", minLength=1),
            "tag": s("tag (default: the chart's appVersion)"),
            "pullPolicy": s("pull policy", enum=["Always", "IfNotPresent", "Never"]),
        },
        desc,
        required=["repository"],
    )


resources = free("container resources (requests, limits)")
sched = {
    "nodeSelector": strmap("node selector"),
    "tolerations": arr("tolerations"),
    "affinity": free("affinity"),
    "podAnnotations": strmap("extra pod annotations"),
}


def port(desc: str) -> Schema:
    return i(desc, 1, maximum=65535)


duration = s("Prometheus duration", pattern="^[0-9]+(ms|s|m|h)$")
schema = obj(
    {
        "images": obj(
            {
                "gateway": image("the gateway (no HDT)"),
                "worker": image("the worker (engine and native store; may carry datasets)"),
                "loader": image("the loader (quanta load, the Rust HDT writer)"),
            },
            "container images",
        ),
        "imagePullSecrets": arr("image pull secrets ({name: ...})"),
        "nameOverride": s("replaces the chart name in object names"),
        "fullnameOverride": s("replaces the release-chart prefix of object names"),
        "commonLabels": strmap("labels on every object"),
        "podSecurityContext": free("pod securityContext (restricted by default)"),
        "securityContext": free("container securityContext (restricted by default)"),
        "hostNetwork": b("every pod on the node's network (test clusters without a pod network)"),
        "catalog": {
            "type": "object",
            "description": "datasets by name (the catalog gateway and workers read)",
            "minProperties": 1,
            "propertyNames": {"pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"},
            "additionalProperties": obj(
                {
                    "path": s("HDT file, relative to data.mountPath or absolute", minLength=1),
                    "description": s("shown by GET /v1/datasets"),
                    "quantumMs": {
                        "description": 'time quantum in ms, or "inf" (never suspend)',
                        "oneOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "enum": ["inf"]}],
                    },
                    "maxResults": i("a page ends at this many solutions", 1),
                    "maxPageBytes": i("a page ends at about this many bytes of JSON results (default 1 MiB)", 1),
                    "planMode": s("how saved plans travel", enum=["auto", "value", "reference"]),
                    "planThresholdBytes": i("auto: plans up to this size go by value", 0),
                    "backend": s(
                        "storage backend: native, the only one (default: the workers' QUANTA_BACKEND, else native);"
                        " pyhdt is retired: still accepted, the workers run it on the native store and log a warning",
                        enum=["native", "pyhdt"],  # pyhdt kept so existing values files still validate
                    ),
                    "default": b("the dataset of /sparql (at most one; none: the first listed)"),
                    "examples": arr(
                        "the query page's example queries",
                        obj(
                            {"name": s("shown in the list", minLength=1), "query": s("SPARQL", minLength=1)},
                            required=["name", "query"],
                        ),
                    ),
                    "graphs": {
                        "type": "object",
                        "description": "named graphs: IRI to HDT file (relative to data.mountPath, or absolute)",
                        "propertyNames": {"pattern": '^[^\\s<>"{}|^`\\\\]+:[^\\s<>"{}|^`\\\\]*$'},
                        "additionalProperties": {"type": "string", "minLength": 1},
                    },
                },
                required=["path", "quantumMs", "maxResults", "planMode", "planThresholdBytes"],
            ),
        },
        "data": obj(
            {
                "source": s(
                    "image: files in the worker image; volume: a PVC mounted read-only", enum=["image", "volume"]
                ),
                "mountPath": s("where workers find the files", pattern="^/"),
                "volume": obj(
                    {
                        "existingClaim": s("use this PVC"),
                        "accessModes": arr(
                            "access modes of the created PVC",
                            {
                                "type": "string",
                                "enum": ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"],
                            },
                        ),
                        "size": s("size of the created PVC"),
                        "storageClassName": s("storage class of the created PVC"),
                    },
                    "the data volume",
                ),
            },
            "where the HDT files come from",
        ),
        "loader": obj(
            {
                "enabled": b("run quanta load Jobs"),
                "jobs": arr(
                    "one Job per dataset",
                    obj(
                        {
                            "dataset": s("a catalog name"),
                            "inputs": arr("RDF dumps, relative to data.mountPath", {"type": "string"}),
                        },
                        required=["dataset", "inputs"],
                    ),
                ),
                "backoffLimit": i("Job retries", 0),
                "ttlSecondsAfterFinished": i("keep finished Jobs this long", 0),
                "resources": resources,
            },
            "the loader Jobs",
        ),
        "signingKeys": obj(
            {
                "existingSecret": s("Secret with key QUANTA_SECRET_KEYS (kid:secret,...)"),
                "keys": arr(
                    "first signs, all verify",
                    obj(
                        {
                            "id": s("key id", pattern="^[A-Za-z0-9._-]{1,32}$"),
                            "secret": s("at least 16 characters", minLength=16),
                        },
                        required=["id", "secret"],
                    ),
                ),
            },
            "plan-signing keys",
        ),
        "gateway": obj(
            {
                "replicas": i("pods when not autoscaled", 0),
                "processes": i("uvicorn processes per pod", 1),
                "port": port("container port"),
                "logLevel": s("log level", enum=["debug", "info", "warning", "error"]),
                "settings": obj(
                    {
                        "maxQueue": i("QUANTA_MAX_QUEUE", 1),
                        "queueReserve": n("QUANTA_QUEUE_RESERVE (share of maxQueue)", minimum=0, exclusiveMaximum=1),
                        "replyTimeoutSeconds": n("QUANTA_REPLY_TIMEOUT_S", exclusiveMinimum=0),
                        "rateLimit": n("QUANTA_RATE_LIMIT (0: off)", minimum=0),
                        "rateBurst": i("QUANTA_RATE_BURST", 1),
                        "maxBodyBytes": i("QUANTA_MAX_BODY_BYTES", 256),
                        "maxQueryChars": i("QUANTA_MAX_QUERY_CHARS", 16),
                        "trustForwarded": b("QUANTA_TRUST_FORWARDED"),
                        "accessLog": b("QUANTA_ACCESS_LOG"),
                        "headerTimeoutSeconds": n("QUANTA_HEADER_TIMEOUT_S", exclusiveMinimum=0),
                        "bodyTimeoutSeconds": n("QUANTA_BODY_TIMEOUT_S", exclusiveMinimum=0),
                        "idleTimeoutSeconds": n("QUANTA_IDLE_TIMEOUT_S", exclusiveMinimum=0),
                        "sendTimeoutSeconds": n("QUANTA_SEND_TIMEOUT_S", exclusiveMinimum=0),
                        "maxHeaderBytes": i("QUANTA_MAX_HEADER_BYTES", 1024),
                        "maxConnections": i("QUANTA_MAX_CONNECTIONS (per process)", 1),
                        "maxConnectionsPerAddress": i("QUANTA_MAX_CONNECTIONS_PER_ADDRESS (per process; 0: none)", 0),
                        "publicUrl": s("QUANTA_PUBLIC_URL"),
                        "localQuantumMs": n("QUANTA_LOCAL_QUANTUM_MS (0: off)", minimum=0, maximum=1000),
                        "localShare": n("QUANTA_LOCAL_SHARE (of a process's time)", exclusiveMinimum=0, maximum=1),
                    },
                    "gateway settings",
                ),
                "extraEnv": arr("extra env entries"),
                "resources": resources,
                "service": obj(
                    {
                        "type": s("Service type", enum=["ClusterIP", "NodePort", "LoadBalancer"]),
                        "port": port("Service port"),
                        "annotations": strmap("Service annotations"),
                    },
                    "the gateway Service",
                ),
                "ingress": obj(
                    {
                        "enabled": b("create an Ingress"),
                        "className": s("ingress class"),
                        "host": s("host name"),
                        "path": s("path prefix", pattern="^/"),
                        "annotations": strmap("Ingress annotations"),
                        "tlsSecret": s("certificate Secret for host (empty: HTTP)"),
                    },
                    "the gateway Ingress",
                ),
                "autoscaling": obj(
                    {
                        "enabled": b("HPA on CPU"),
                        "minReplicas": i("min", 1),
                        "maxReplicas": i("max", 1),
                        "targetCPUUtilizationPercentage": i("target CPU %", 1, maximum=100),
                    },
                    "gateway HPA",
                ),
                "podDisruptionBudget": obj(
                    {"enabled": b("create a PDB"), "minAvailable": i("pods kept through voluntary disruptions", 0)},
                    "gateway PDB",
                ),
                "terminationGracePeriodSeconds": i("seconds to answer the requests in flight", 1),
                **sched,
            },
            "the HTTP gateway",
        ),
        "worker": obj(
            {
                "replicas": i("pods when not autoscaled", 0),
                "logLevel": s("log level", enum=["debug", "info", "warning", "error"]),
                "metricsPort": port("/metrics, /livez, /readyz"),
                "livenessTimeoutSeconds": n("loop stall before /livez fails", exclusiveMinimum=0),
                "terminationGracePeriodSeconds": i("seconds to finish the quantum in hand", 1),
                "reclaimIdleMs": i("0: the stall limit plus 2 s", 0),
                "stallSeconds": n("a quantum past this is stopped: 422 stall-limit (0: ten quanta, >= 5 s)", minimum=0),
                "extraEnv": arr("extra env entries"),
                "resources": resources,
                "autoscaling": obj(
                    {
                        "keda": obj(
                            {
                                "enabled": b("KEDA ScaledObject (redis-streams, lag)"),
                                "minReplicas": i("min (0: scale to zero)", 0),
                                "maxReplicas": i("max", 1),
                                "pollingInterval": i("seconds between checks", 1),
                                "cooldownPeriod": i("seconds idle before scaling to zero", 0),
                                "lagCount": i("target lag per worker", 1),
                                "activationLagCount": i("lag above which workers start from zero", 0),
                                "behavior": free("the HPA's autoscaling/v2 behavior (scaleUp, scaleDown)"),
                            },
                            "KEDA",
                        ),
                        "hpa": obj(
                            {
                                "enabled": b("HPA on an external metric (prometheus-adapter)"),
                                "minReplicas": i("min", 0),
                                "maxReplicas": i("max", 1),
                                "metricName": s("external metric", minLength=1),
                                "targetAverageValue": n("target per worker", exclusiveMinimum=0),
                                "behavior": free("autoscaling/v2 behavior (scaleUp, scaleDown)"),
                            },
                            "HPA",
                        ),
                    },
                    "worker autoscaling: at most one",
                ),
                "podDisruptionBudget": obj(
                    {"enabled": b("create a PDB"), "maxUnavailable": i("pods down at once", 1)}, "worker PDB"
                ),
                **sched,
            },
            "the workers",
        ),
        "redis": obj(
            {
                "shards": i("Redis servers the queue is spread over, each with its own workers", 1),
                "timeoutSeconds": n("QUANTA_REDIS_TIMEOUT_S", exclusiveMinimum=0),
                "connectTimeoutSeconds": n("QUANTA_REDIS_CONNECT_TIMEOUT_S", exclusiveMinimum=0),
                "embedded": obj(
                    {
                        "enabled": b("run a single-node Redis"),
                        "image": image("Redis 7+"),
                        "port": port("port"),
                        "runAsUser": i("uid of the Redis process", 1),
                        "persistence": obj(
                            {
                                "enabled": b("AOF on a PVC"),
                                "size": s("PVC size"),
                                "storageClassName": s("storage class"),
                                "retainOnUninstall": b("keep the volume after uninstall"),
                            },
                            "persistence",
                        ),
                        "maxmemory": s("3/4 of the memory limit, e.g. 768mb (empty: none); writes refused past it"),
                        "resources": resources,
                    },
                    "embedded Redis",
                ),
                "external": obj(
                    {
                        "url": s(
                            "redis:// or rediss://; several shards: one URL each, comma-separated",
                            pattern="^(|rediss?://.*)$",
                        ),
                        "urlSecret": s("Secret with key url (one shard)"),
                        "passwordSecret": s("Secret with key password"),
                        "tls": obj(
                            {
                                "secret": s("Secret with ca.crt (tls.crt, tls.key)"),
                                "clientCertificate": b("present tls.crt/tls.key"),
                                "checkHostname": b("verify the server's host name"),
                            },
                            "TLS",
                        ),
                        "sentinel": obj(
                            {
                                "enabled": b("find the master through Sentinel"),
                                "hosts": arr(
                                    "host:port of each Sentinel", {"type": "string", "pattern": "^.+:[0-9]+$"}
                                ),
                                "masterName": s("monitored master name", minLength=1),
                                "passwordSecret": s("Secret with key sentinel-password"),
                            },
                            "Sentinel",
                        ),
                    },
                    "a Redis of your own",
                ),
            },
            "Redis",
        ),
        "networkPolicy": obj(
            {
                "enabled": b("create NetworkPolicies"),
                "gatewayFrom": arr("NetworkPolicyPeers allowed to reach the gateway"),
                "externalRedisPorts": arr("ports of an external Redis and its Sentinels", {"type": "integer"}),
            },
            "network policies",
        ),
        "monitoring": obj(
            {
                "labels": strmap(
                    "labels selecting the ServiceMonitor, PodMonitor, PrometheusRule"
                    " (e.g. release: kube-prometheus-stack)"
                ),
                "serviceMonitor": obj({"enabled": b("scrape the gateway"), "interval": duration}, "ServiceMonitor"),
                "podMonitor": obj({"enabled": b("scrape the workers"), "interval": duration}, "PodMonitor"),
                "prometheusRule": obj(
                    {
                        "enabled": b("alerts"),
                        "queueLagThreshold": i("QuantaQueueLagGrowing: lag above", 0),
                        "preemptionOverheadRatio": n(
                            "QuantaPreemptionOverhead: share of quantum time", exclusiveMinimum=0
                        ),
                        "replyTimeoutRatio": n("QuantaReplyTimeouts: share of queries", exclusiveMinimum=0),
                        "errorRatio": n("QuantaHighErrorRate: share of requests", exclusiveMinimum=0),
                    },
                    "PrometheusRule",
                ),
                "dashboards": obj(
                    {
                        "enabled": b("Grafana dashboards as ConfigMaps"),
                        "labels": strmap("labels Grafana's sidecar selects"),
                        "annotations": strmap("annotations (e.g. a folder)"),
                    },
                    "dashboards",
                ),
            },
            "Prometheus and Grafana",
        ),
        "tests": obj(
            {
                "enabled": b("the helm test pod"),
                "dataset": s("dataset queried"),
                "query": s("SPARQL query"),
                "expectedRows": i("rows the query must give", 0),
            },
            "helm test",
        ),
    },
    "quanta chart values",
)
schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
print(json.dumps(schema, indent=2))
