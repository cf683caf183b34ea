"""A real Kubernetes API server (scripts/k8s/cluster.sh) for the chart's install tests.

Tier 3 (`apiserver`): etcd, kube-apiserver, controller-manager, scheduler and a kwok node.
Tier 4 (`pods`): the same control plane with a kubelet and containerd running the images.
The tests are marked `cluster`; without the tools they skip unless QUANTA_K8S_REQUIRED=1."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NS = "quanta"  # where tier 4 installs its release
IMAGES = [
    "quanta-gateway:dev", "quanta-worker:dev", "quanta-loader:dev", "quanta-redis:bookworm", "quanta-pause:bookworm"
]  # fmt: skip
CHART = ROOT / "charts" / "quanta"
SCRIPTS = ROOT / "scripts" / "k8s"
TOOLS = Path(os.environ.get("QUANTA_K8S_TOOLS", Path.home() / ".cache" / "quanta" / "k8s" / "bin"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Clusters take a while to start: these tiers run from scripts/k8s/test.sh (or QUANTA_K8S_CLUSTER=1)."""
    if os.environ.get("QUANTA_K8S_REQUIRED") == "1" or os.environ.get("QUANTA_K8S_CLUSTER") == "1":
        return
    skip = pytest.mark.skip(reason="a cluster tier: run scripts/k8s/test.sh apiserver|pods|keda")
    for item in items:
        if "cluster" in item.keywords:
            item.add_marker(skip)


def require(*names: str) -> None:
    missing = [n for n in names if not (TOOLS / n).exists()]
    if missing:
        message = f"missing {', '.join(missing)} in {TOOLS}: run scripts/k8s/tools.sh apiserver (pods, keda)"
        if os.environ.get("QUANTA_K8S_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def require_tools() -> Callable[..., None]:
    """require_tools(*names): skip (or fail, with QUANTA_K8S_REQUIRED=1) unless they are built."""
    return require


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = {
            **os.environ,
            "QUANTA_CLUSTER_DIR": str(folder),
            "QUANTA_API_PORT": str(free_port()),
            "QUANTA_ETCD_PORT": str(free_port()),
            "KUBECONFIG": str(folder / "kubeconfig"),
        }

    def script(self, *args: str, timeout: float = 180) -> None:
        done = subprocess.run([str(SCRIPTS / "cluster.sh"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr + self.logs()

    def logs(self) -> str:
        return "".join(f"\n--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.folder.glob("*.log")))

    def run(self, tool: str, *args: str, check: bool = True, timeout: float = 300, stdin: str | None = None) -> str:
        done = subprocess.run([str(TOOLS / tool), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, input=stdin)  # fmt: skip
        if check:
            assert done.returncode == 0, f"{tool} {' '.join(args)}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def kubectl(self, *args: str, **kw: Any) -> str:
        return self.run("kubectl", *args, **kw)

    def helm(self, *args: str, **kw: Any) -> str:
        return self.run("helm", *args, **kw)

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def install_crds(self) -> None:
        self.kubectl("apply", "--server-side", "-f", str(TOOLS / "schemas-crds" / "crds"))
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def wait_until(self, check: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"{what}: not true after {timeout}s"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane with one kwok (simulated) node, the KEDA and prometheus-operator CRDs."""
    require("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "helm")
    cluster = Cluster(tmp_path_factory.mktemp("apiserver"))
    try:
        cluster.script("start", "--kwok")
        cluster.install_crds()
        yield cluster
    finally:
        cluster.script("stop")


class Release:
    def __init__(self, cluster: Cluster, port: int, values: list[str]) -> None:
        self.cluster = cluster
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1/datasets/watdiv-100k/query"
        self.values = values  # the install's -f/--set arguments, for upgrades

    def page(self, body: dict[str, str], dataset: str = "watdiv-100k") -> dict[str, Any]:
        url = self.url.replace("/watdiv-100k/", f"/{dataset}/")
        request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)  # type: ignore[no-any-return]

    def query(
        self, query: str, between_pages: Any = None, dataset: str = "watdiv-100k"
    ) -> tuple[list[tuple[str, ...]], int]:
        """Follow `next` to the end; `between_pages(n)` runs after page n."""
        rows: list[tuple[str, ...]] = []
        body, pages = {"query": query}, 0
        while True:
            page = self.page(body, dataset)
            pages += 1
            rows += [tuple(b[v]["value"] for v in page["head"]["vars"]) for b in page["results"]["bindings"]]
            if between_pages:
                between_pages(pages)
            if page["next"] is None:
                return rows, pages
            body = {"next": page["next"]}

    def pods(self, component: str) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/component={component}"
        return self.cluster.get("pods", "-n", NS, "-l", selector)["items"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    require("etcd", "kube-apiserver", "kubelet", "kubectl", "helm")
    cluster = Cluster(tmp_path_factory.mktemp("pods"))
    try:
        cluster.script("start", "--kubelet")
        cluster.script("import", *IMAGES, timeout=600)
        gateway_port = free_port()
        values = ["-f", str(ROOT / "tests" / "cluster" / "values-real-pods.yaml"),
                  "--set", f"gateway.port={gateway_port}", "--set", f"worker.metricsPort={free_port()}",
                  "--set", f"redis.embedded.port={free_port()}"]  # fmt: skip
        cluster.helm("install", "q", str(CHART), "-n", NS, "--create-namespace", "--wait", "--timeout", "4m", *values,
                     timeout=400)  # fmt: skip
        yield Release(cluster, gateway_port, values)
    finally:
        cluster.script("stop")
