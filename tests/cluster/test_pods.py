"""Tier 4: real pods (kubelet and containerd, the images built here). The release's gateway, worker
and Redis run, `helm test` and SELECTs through the gateway's SPARQL endpoint give the engine's answer
(and the preemptive protocol's /v1 pages too), logs are JSON lines, and a worker pod killed mid-query
loses nothing."""

from __future__ import annotations

import gzip
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CHART = str(ROOT / "charts" / "quanta")
LIKES = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }"
EVERYTHING = "SELECT ?s ?p ?o WHERE { ?s ?p ?o }"
NS = "quanta"  # the release namespace (conftest)


def expected(query: str) -> list[tuple[str | None, ...]]:
    """The engine's answer, in-process, over the same sample file the worker image carries."""
    from quanta.engine.storage import open_store
    from quanta.testkit.engine import run_paged

    store = open_store(str(ROOT / "data" / "watdiv-100k.hdt"), name="watdiv-100k")
    _, rows, _, _ = run_paged(store, query, None)
    return sorted(rows, key=lambda r: tuple(t or "" for t in r))


def test_gateway_worker_and_redis_run_as_real_pods(release) -> None:
    for component in ("gateway", "worker", "redis"):
        (pod,) = release.pods(component)
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert pod["status"]["phase"] == "Running" and ready["Ready"] == "True", component
        context = pod["spec"]["containers"][0]["securityContext"]
        assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"]


def container_log(pod: dict[str, Any]) -> list[str]:
    """What the pod's container printed (no `kubectl logs` here: the node has no address the API server
    may dial), from the kubelet's file, CRI format: time stream tag message."""
    meta = pod["metadata"]
    files = list(Path("/var/log/pods").glob(f"{meta['namespace']}_{meta['name']}_{meta['uid']}/*/0.log"))
    assert files, meta["name"]
    return [line.split(" ", 3)[3] for line in files[0].read_text().splitlines()]


def test_helm_test_runs_a_real_sparql_select(release) -> None:
    # the pod sends tests.query to /sparql/DATASET and exits 1 unless it gives tests.expectedRows rows
    out = release.cluster.helm("test", "q", "-n", NS, "--timeout", "2m")
    assert "Phase:          Succeeded" in out
    pod = release.cluster.get("pod", "q-quanta-test-query", "-n", NS)
    printed = json.loads(container_log(pod)[-1])
    assert printed["vars"] == ["s"] and printed["rows"] == 3
    assert printed["first"][0]["s"]["value"].startswith("http://db.uwaterloo.ca/~galuc/wsdbm/User")


def test_a_select_through_the_gateway_gives_the_engine_answer(release) -> None:
    answer = expected(LIKES)
    rows = release.sparql(LIKES)  # the SPARQL endpoint
    assert len(rows) > 1000 and sorted(rows) == answer
    # its first quantum ran in the gateway pod, on the sample its image carries (gateway.settings.localQuantumMs)
    with urllib.request.urlopen(f"http://127.0.0.1:{release.port}/metrics", timeout=30) as response:
        metrics = response.read().decode()
    local = re.findall(r'^quanta_gateway_local_quanta_total\{outcome="(?:complete|suspended)"\} (\S+)$', metrics, re.M)
    assert sum(float(n) for n in local) >= 1, "no first quantum ran in the gateway"
    paged, _ = release.query(LIKES)  # the preemptive protocol, its pages followed to the end
    assert sorted(paged) == answer


def test_logs_are_json_lines(release) -> None:
    for component in ("gateway", "worker"):
        (pod,) = release.pods(component)
        records = [json.loads(line) for line in container_log(pod)]
        assert records and all({"ts", "level", "logger", "msg"} <= r.keys() for r in records), component


def test_a_worker_pod_killed_mid_query_loses_nothing(release) -> None:
    """A SELECT streamed from /sparql (TSV, a row a line); the only worker is force-deleted after the
    first row: the Deployment's new worker takes the query over and the answer is whole."""
    (victim,) = release.pods("worker")
    started = time.monotonic()
    rows: list[bytes] = []
    with urllib.request.urlopen(release.sparql_request(EVERYTHING, "text/tab-separated-values"), timeout=300) as answer:
        assert answer.readline() == b"?s\t?p\t?o\n"
        for line in answer:
            rows.append(line)
            if len(rows) == 1:
                release.cluster.kubectl("delete", "pod", "-n", NS, victim["metadata"]["name"], "--grace-period=0",
                                        "--force", "--wait=false")  # fmt: skip
    assert len(rows) == 104_072 and len(set(rows)) == 104_072  # every triple, once
    (replacement,) = [p for p in release.pods("worker") if p["metadata"]["uid"] != victim["metadata"]["uid"]]
    assert replacement["status"]["phase"] == "Running"
    with urllib.request.urlopen(release.worker_metrics, timeout=10) as response:  # the new worker's own counters
        metrics = response.read().decode()
    ran = re.findall(r'^quanta_tasks_total\{dataset="watdiv-100k",outcome="page"\} (\S+)$', metrics, re.M)
    assert ran and float(ran[0]) > 0, "the replacement worker ran none of the query"
    print(f"a streamed SELECT across a killed worker: {time.monotonic() - started:.1f} s, {float(ran[0]):.0f} tasks "
          "on the replacement")  # fmt: skip


PEOPLE = "".join(f'<http://example.org/p{i}> <http://xmlns.com/foaf/0.1/name> "person {i}" .\n' for i in range(5000))


def test_a_loader_job_fills_the_data_volume_and_the_workers_serve_it(release) -> None:
    """Runs last: it moves the release to a data volume (hostPath here) that a loader Job fills."""
    data = release.cluster.folder / "data"
    (data / "dumps").mkdir(parents=True)
    data.chmod(0o777)
    with gzip.open(data / "dumps" / "people.nt.gz", "wt") as dump:
        dump.write(PEOPLE)
    release.cluster.kubectl("apply", "-f", "-", stdin=VOLUME.format(path=data, ns=NS))
    sample = {"path": "/opt/quanta/data/watdiv-100k.hdt", "quantumMs": 75, "maxResults": 2000, "planMode": "auto",
              "planThresholdBytes": 4096}  # fmt: skip
    values = {
        "data": {"source": "volume", "mountPath": "/data", "volume": {"existingClaim": "quanta-data"}},
        "loader": {"enabled": True, "jobs": [{"dataset": "people", "inputs": ["dumps/people.nt.gz"]}]},
        "catalog": {"watdiv-100k": sample, "people": {**sample, "path": "people.hdt"}},
    }
    overlay = release.cluster.folder / "loader-values.json"
    overlay.write_text(json.dumps(values))
    release.cluster.helm("upgrade", "q", CHART, "-n", NS, *release.values, "-f", str(overlay), timeout=120)
    release.cluster.kubectl("wait", "-n", NS, "--for=condition=complete", "job/q-quanta-load-people", "--timeout=180s",
                            timeout=200)  # fmt: skip
    assert {p.name for p in data.iterdir()} >= {"people.hdt", "people.hdt.meta.json"}
    deadline = time.monotonic() + 240  # workers restarted while the file was missing: back-off
    while True:
        try:
            rows = release.sparql("SELECT ?p ?n WHERE { ?p <http://xmlns.com/foaf/0.1/name> ?n }", dataset="people")
            break
        except (OSError, urllib.error.HTTPError):
            assert time.monotonic() < deadline, "the workers never served the loaded dataset"
            time.sleep(2)
    assert len(rows) == 5000 and ("http://example.org/p7", "person 7") in rows


# A volume the test fills itself, bound to one claim (no provisioner here).
VOLUME = """
apiVersion: v1
kind: PersistentVolume
metadata: {{name: quanta-data}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteMany]
  storageClassName: manual
  claimRef: {{namespace: {ns}, name: quanta-data}}
  hostPath: {{path: "{path}"}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: quanta-data, namespace: {ns}}}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: manual
  volumeName: quanta-data
  resources: {{requests: {{storage: 1Gi}}}}
"""
