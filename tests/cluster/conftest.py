"""A real Kubernetes API server (scripts/k8s/cluster.sh) for the chart's install tests.

Tier 3 (`apiserver`): etcd, kube-apiserver, controller-manager, scheduler and a kwok node.
Tier 4 (`pods`): the same control plane with a kubelet and containerd running the images.
The tests are marked `cluster`; without the tools they skip unless QUANTA_K8S_REQUIRED=1."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    skip = pytest.mark.skip(reason="a cluster tier: run scripts/k8s/test.sh apiserver|pods|keda|hpa")
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
        got: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json"))
        return got

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


def certificates(folder: Path, *names: str) -> Path:
    """A CA and a certificate it signs for 127.0.0.1, localhost and `names`, good for serving and as a
    client (ca.crt, tls.crt, tls.key in `folder`): what a metrics adapter shows the API server, and
    what KEDA's adapter and operator show each other on their gRPC link."""
    folder.mkdir(parents=True, exist_ok=True)
    sans = ",".join(["IP:127.0.0.1", "DNS:localhost", *(f"DNS:{n}" for n in names)])
    (folder / "ext").write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n")
    for args in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=quanta-test-ca",
         "-keyout", "ca.key", "-out", "ca.crt"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=metrics-adapter", "-keyout", "tls.key",
         "-out", "tls.csr"],
        ["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
         "-extfile", "ext", "-out", "tls.crt"],
    ):  # fmt: skip
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    return folder


@contextmanager
def background(command: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A process of the test's own (an operator, an adapter, Prometheus), its output in `log`."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


EXTERNAL_METRICS = "v1beta1.external.metrics.k8s.io"


def register_external_metrics(cluster: Cluster, namespace: str, service: str, port: int, ca: Path) -> float:
    """Serve the external metrics API (external.metrics.k8s.io/v1beta1, what an HPA's External metric
    reads) from an adapter listening on this host's loopback at `port`; seconds until it is Available.

    The APIService names a Service; the API server's default (cluster IP) routing dials an ExternalName
    Service by its name, here `localhost`. The other ways need an address off loopback: a ClusterIP
    does not route without kube-proxy, and with --enable-aggregator-routing the API server dials an
    EndpointSlice address, which may not be loopback (validation refuses 127.0.0.0/8). The adapter's
    certificate names `SERVICE.NAMESPACE.svc` (what the API server checks) and is signed by `ca`."""
    started = time.monotonic()
    cluster.kubectl("create", "namespace", namespace, check=False)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": namespace},
             "spec": {"type": "ExternalName", "externalName": "localhost"}},
            {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": EXTERNAL_METRICS},
             "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                      "versionPriority": 100, "caBundle": base64.b64encode(ca.read_bytes()).decode(),
                      "service": {"namespace": namespace, "name": service, "port": port}}},
        ],
    }))  # fmt: skip
    cluster.kubectl("wait", "--for=condition=Available", f"apiservice/{EXTERNAL_METRICS}", "--timeout=60s", timeout=90)
    return time.monotonic() - started


def external_metric(cluster: Cluster, namespace: str, name: str, selector: dict[str, str]) -> float:
    """The value the external metrics API gives an HPA for `name` (what the adapter serves)."""
    query = urllib.parse.urlencode({"labelSelector": ",".join(f"{k}={v}" for k, v in selector.items())})
    answer = json.loads(
        cluster.kubectl("get", "--raw", f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{name}?{query}")
    )
    return sum(quantity(item["value"]) for item in answer["items"])


def quantity(text: str) -> float:
    """A Kubernetes quantity as the HPA reports metrics: "20", "6667m"."""
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


class Release:
    def __init__(self, cluster: Cluster, port: int, worker_metrics_port: int, values: list[str]) -> None:
        self.cluster = cluster
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1/datasets/watdiv-100k/query"
        self.worker_metrics = f"http://127.0.0.1:{worker_metrics_port}/metrics"  # host network: one worker a node
        self.values = values  # the install's -f/--set arguments, for upgrades

    def sparql_request(self, query: str, accept: str, dataset: str = "watdiv-100k") -> urllib.request.Request:
        """GET /sparql/DATASET?query=... (the SPARQL 1.1 Protocol endpoint)."""
        url = f"http://127.0.0.1:{self.port}/sparql/{dataset}?" + urllib.parse.urlencode({"query": query})
        return urllib.request.Request(url, headers={"accept": accept})

    def sparql(self, query: str, dataset: str = "watdiv-100k") -> list[tuple[str, ...]]:
        """A SELECT's rows through the SPARQL endpoint (JSON results), each binding's value by variable."""
        request = self.sparql_request(query, "application/sparql-results+json", dataset)
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.headers["content-type"].startswith("application/sparql-results+json")
            answer = json.load(response)
        names = answer["head"]["vars"]
        return [tuple(b[v]["value"] for v in names) for b in answer["results"]["bindings"]]

    def page(self, body: dict[str, str], dataset: str = "watdiv-100k") -> dict[str, Any]:
        url = self.url.replace("/watdiv-100k/", f"/{dataset}/")
        request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            page: dict[str, Any] = json.load(response)
        return page

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
        pods: list[dict[str, Any]] = self.cluster.get("pods", "-n", NS, "-l", selector)["items"]
        return pods


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    require("etcd", "kube-apiserver", "kubelet", "kubectl", "helm")
    cluster = Cluster(tmp_path_factory.mktemp("pods"))
    try:
        cluster.script("start", "--kubelet")
        cluster.script("import", *IMAGES, timeout=600)
        gateway_port, worker_port = free_port(), free_port()
        values = ["-f", str(ROOT / "tests" / "cluster" / "values-real-pods.yaml"),
                  "--set", f"gateway.port={gateway_port}", "--set", f"worker.metricsPort={worker_port}",
                  "--set", f"redis.embedded.port={free_port()}"]  # fmt: skip
        cluster.helm("install", "q", str(CHART), "-n", NS, "--create-namespace", "--wait", "--timeout", "4m", *values,
                     timeout=400)  # fmt: skip
        yield Release(cluster, gateway_port, worker_port, values)
    finally:
        cluster.script("stop")
