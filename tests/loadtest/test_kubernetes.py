"""The Kubernetes Jobs of the load tests (loadtest/kubernetes): `helm lint --strict`, then the
rendered objects validated by kubeconform (strict, the offline Kubernetes schemas), and what
they must say: a master that expects its workers, workers that find it, the locustfile's
options as environment variables, and a default target that is the quanta chart's gateway
Service. The tools come from scripts/k8s/tools.sh static (the chart tests' own); without them
these tests skip, unless QUANTA_K8S_REQUIRED=1."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "loadtest" / "kubernetes"
QUANTA_CHART = ROOT / "charts" / "quanta"
TOOLS = Path(os.environ.get("QUANTA_K8S_TOOLS", Path.home() / ".cache" / "quanta" / "k8s" / "bin"))
KUBE_VERSION = "v1.37.2"


def tool(name: str) -> str:
    path = TOOLS / name
    if not path.exists():
        if os.environ.get("QUANTA_K8S_REQUIRED") == "1":
            pytest.fail(f"{path} is missing: run scripts/k8s/tools.sh static")
        pytest.skip(f"{path} is missing: run scripts/k8s/tools.sh static")
    return str(path)


def render(chart: Path, tmp: Path, values: dict[str, Any] | None = None, *extra: str) -> list[dict[str, Any]]:
    (tmp / "values.json").write_text(json.dumps(values or {}))
    command = [
        tool("helm"),
        "template",
        "quanta",
        str(chart),
        "--kube-version",
        KUBE_VERSION,
        "-f",
        str(tmp / "values.json"),
        *extra,
    ]
    manifests = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    schemas = f"{TOOLS}/schemas-k8s/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json"
    done = subprocess.run([tool("kubeconform"), "-strict", "-summary", "-schema-location", schemas],
                          input=manifests, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [doc for doc in yaml.safe_load_all(manifests) if doc]


def by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def test_lint() -> None:
    done = subprocess.run([tool("helm"), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_defaults(tmp_path: Path) -> None:
    objects = by_name(render(CHART, tmp_path))
    assert set(objects) == {
        "Job/quanta-loadtest-master",
        "Job/quanta-loadtest-worker",
        "Service/quanta-loadtest-master",
    }
    master = objects["Job/quanta-loadtest-master"]["spec"]["template"]["spec"]["containers"][0]
    assert {"--master", "--headless", "--expect-workers=2", "--users=64"} <= set(master["args"])
    worker_job = objects["Job/quanta-loadtest-worker"]["spec"]
    assert worker_job["parallelism"] == worker_job["completions"] == 2
    worker = worker_job["template"]["spec"]["containers"][0]
    assert "--master-host=quanta-loadtest-master" in worker["args"]
    for container in (master, worker):
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["QUANTA_LOADTEST_DATASET"] == "watdiv-100k"
        assert env["QUANTA_LOADTEST_WORKLOAD"] == "/app/loadtest/workloads/basic-watdiv-100k.jsonl"
        assert env["LOCUST_USER_CLASSES"] == "QuantaUser"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # the workload the image ships for the chart's default dataset
    assert (ROOT / "loadtest" / "workloads" / "basic-watdiv-100k.jsonl").exists()


def test_default_target_is_the_quanta_charts_gateway(tmp_path: Path) -> None:
    """The release `quanta` of charts/quanta serves its gateway where the load test looks."""
    service = render(QUANTA_CHART, tmp_path, {}, "--show-only", "templates/gateway/gateway-service.yaml")[0]
    port = service["spec"]["ports"][0]["port"]
    expected = f"http://{service['metadata']['name']}" + ("" if port == 80 else f":{port}")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["host"] == expected


def test_web_ui_and_sparql_user(tmp_path: Path) -> None:
    values = {"headless": False, "userClass": "SparqlUser", "workers": 4, "extraEnv": [{"name": "X", "value": "1"}]}
    objects = by_name(render(CHART, tmp_path, values))
    master = objects["Job/quanta-loadtest-master"]["spec"]["template"]["spec"]["containers"][0]
    assert "--headless" not in master["args"] and not any(a.startswith("--run-time") for a in master["args"])
    env = {e["name"]: e["value"] for e in master["env"]}
    assert env["LOCUST_USER_CLASSES"] == "SparqlUser" and env["X"] == "1"
    assert objects["Job/quanta-loadtest-worker"]["spec"]["parallelism"] == 4
