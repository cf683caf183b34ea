"""Tier 4: real pods (kubelet and containerd, the images built here). The release's gateway, worker
and Redis run, `helm test` and a query through the gateway give the engine's answer, logs are JSON
lines, and a worker pod killed mid-query loses nothing."""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CHART = str(ROOT / "charts" / "quanta")
LIKES = "SELECT ?s ?o WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/likes> ?o }"
EVERYTHING = "SELECT ?s ?p ?o WHERE { ?s ?p ?o }"
NS = "quanta"  # the release namespace (conftest)


def expected(query: str) -> list[tuple[str, ...]]:
    """The engine's answer, in-process, over the same sample file the worker image carries."""
    from quanta.engine.storage import open_store
    from quanta.engine.testing import run_paged

    store = open_store(str(ROOT / "data" / "watdiv-100k.hdt"), name="watdiv-100k")
    _, rows, _, _ = run_paged(store, query, None)
    return sorted(tuple(r) for r in rows)


def test_gateway_worker_and_redis_run_as_real_pods(release) -> None:  # type: ignore[no-untyped-def]
    for component in ("gateway", "worker", "redis"):
        (pod,) = release.pods(component)
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert pod["status"]["phase"] == "Running" and ready["Ready"] == "True", component
        context = pod["spec"]["containers"][0]["securityContext"]
        assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"]


def test_helm_test_runs_a_real_query(release) -> None:  # type: ignore[no-untyped-def]
    # the pod exits 1 unless the query gives tests.expectedRows rows (no `kubectl logs` here: no node address)
    out = release.cluster.helm("test", "q", "-n", NS, "--timeout", "2m")
    assert "Phase:          Succeeded" in out


def test_a_query_through_the_gateway_gives_the_engine_answer(release) -> None:  # type: ignore[no-untyped-def]
    rows, _ = release.query(LIKES)
    assert len(rows) > 1000 and sorted(rows) == expected(LIKES)


def test_logs_are_json_lines(release) -> None:  # type: ignore[no-untyped-def]
    for component in ("gateway", "worker"):
        (pod,) = release.pods(component)
        meta = pod["metadata"]
        files = list(Path("/var/log/pods").glob(f"{NS}_{meta['name']}_{meta['uid']}/*/0.log"))
        assert files, component
        lines = files[0].read_text().splitlines()  # CRI format: time stream tag message
        records = [json.loads(line.split(" ", 3)[3]) for line in lines]
        assert records and all({"ts", "level", "logger", "msg"} <= r.keys() for r in records), component


def test_a_worker_pod_killed_mid_query_loses_nothing(release) -> None:  # type: ignore[no-untyped-def]
    (victim,) = release.pods("worker")
    killed = threading.Event()

    def kill_once(page: int) -> None:  # type: ignore[no-untyped-def]
        if page == 3 and not killed.is_set():
            release.cluster.kubectl("delete", "pod", "-n", NS, victim["metadata"]["name"], "--grace-period=0",
                                    "--force", "--wait=false")  # fmt: skip
            killed.set()

    started = time.monotonic()
    rows, pages = release.query(EVERYTHING, between_pages=kill_once)
    assert killed.is_set() and pages > 10
    assert len(rows) == 104_072 and len(set(rows)) == 104_072  # every triple, once
    (replacement,) = [p for p in release.pods("worker") if p["metadata"]["uid"] != victim["metadata"]["uid"]]
    assert replacement["status"]["phase"] == "Running"
    print(f"query of {pages} pages across a killed worker: {time.monotonic() - started:.1f} s")


PEOPLE = "".join(f'<http://example.org/p{i}> <http://xmlns.com/foaf/0.1/name> "person {i}" .\n' for i in range(5000))


def test_a_loader_job_fills_the_data_volume_and_the_workers_serve_it(release) -> None:  # type: ignore[no-untyped-def]
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
            rows, _ = release.query("SELECT ?p ?n WHERE { ?p <http://xmlns.com/foaf/0.1/name> ?n }", dataset="people")
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
