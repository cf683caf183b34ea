"""Render the chart with helm and validate every object with kubeconform (strict, offline schemas of
Kubernetes, KEDA and prometheus-operator). The tools come from scripts/k8s/tools.sh static;
without them these tests skip, unless QUANTA_K8S_REQUIRED=1 (scripts/k8s/test.sh) makes that a failure."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "quanta"
TOOLS = Path(os.environ.get("QUANTA_K8S_TOOLS", Path.home() / ".cache" / "quanta" / "k8s" / "bin"))
KUBE_VERSION = "v1.37.2"

Render = Callable[..., list[dict[str, Any]]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/chart carries the `chart` marker (select or deselect them with -m)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.chart)


def tool(name: str) -> Path:
    path = TOOLS / name
    if not path.exists():
        message = f"{path} is missing: run scripts/k8s/tools.sh static"
        if os.environ.get("QUANTA_K8S_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


class RenderError(Exception):
    """helm template failed (a schema or check-values failure); the message is helm's."""


def helm_template(values: dict[str, Any], tmp_path: Path, show_only: list[str] | None = None) -> str:
    values_file = tmp_path / "values.json"
    values_file.write_text(json.dumps(values))
    cmd = [str(tool("helm")), "template", "quanta", str(CHART), "--namespace", "test", "--kube-version", KUBE_VERSION,
           "-f", str(values_file)]  # fmt: skip
    for template in show_only or []:
        cmd += ["--show-only", template]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RenderError(done.stderr)
    return done.stdout


def kubeconform(manifests: str) -> None:
    schemas = [TOOLS / "schemas-k8s", TOOLS / "schemas-crds"]
    cmd = [str(tool("kubeconform")), "-strict", "-summary", "-output", "json"]
    for folder in schemas:
        cmd += ["-schema-location", f"{folder}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json"]
    done = subprocess.run(cmd, input=manifests, capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    bad = [r for r in report.get("resources", []) if r["status"] not in ("statusValid", "statusEmpty")]
    assert done.returncode == 0 and not bad, json.dumps(bad or report, indent=1)


@pytest.fixture
def render(tmp_path: Path) -> Render:
    """render(values, show_only=[...]) -> the objects, each validated by kubeconform first."""

    def run(values: dict[str, Any] | None = None, show_only: list[str] | None = None) -> list[dict[str, Any]]:
        manifests = helm_template(values or {}, tmp_path, show_only)
        kubeconform(manifests)
        return [doc for doc in yaml.safe_load_all(manifests) if doc]

    return run


@pytest.fixture
def render_error(tmp_path: Path) -> Callable[[dict[str, Any]], str]:
    """The error helm gives for values that must be refused."""

    def run(values: dict[str, Any]) -> str:
        with pytest.raises(RenderError) as error:
            helm_template(values, tmp_path)
        return str(error.value)

    return run


def find_one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{kind} *{name_suffix}: {[d['metadata']['name'] for d in found]}"
    return found[0]


@pytest.fixture
def helm() -> Path:
    return tool("helm")


@pytest.fixture
def promtool() -> Callable[..., subprocess.CompletedProcess[str]]:
    """promtool(*args): run it, for its output and exit status."""
    path = tool("promtool")
    return lambda *args: subprocess.run([str(path), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def one() -> Callable[..., dict[str, Any]]:
    """one(docs, kind, name_suffix): the only object of that kind whose name ends so."""
    return find_one
