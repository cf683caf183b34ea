"""The dashboards and alerts name only metrics the service really exports: a real Prometheus
scrapes a real gateway and workers (over redis-server and the sample dataset) while queries run,
then every panel's query and every alert's expression is evaluated against what it stored, and
each dashboard is drawn (docs/img with QUANTA_RENDER_DOCS=1)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from quanta.common.redis_server import free_port, redis_server, wait_ready

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "watdiv-100k.hdt"
DASHBOARDS = sorted((ROOT / "charts" / "quanta" / "files" / "dashboards").glob("*.json"))
WSDBM = "http://db.uwaterloo.ca/~galuc/wsdbm/"
QUERIES = [
    f"SELECT ?s ?o WHERE {{ ?s <{WSDBM}likes> ?o }}",  # many pages
    f"SELECT ?s ?f WHERE {{ ?s <{WSDBM}follows> ?f . ?f <{WSDBM}likes> ?p }}",  # a join, preempted
    f"ASK {{ ?s <{WSDBM}likes> ?o }}",
    "SELECT * WHERE { ?s ?p }",  # 400: a syntax error, for the status panel
]
LOAD_SECONDS = 20


@dataclass
class Live:
    prometheus: str
    start: float
    end: float


def promql(live: Live, expr: str) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "time": live.end})
    with urllib.request.urlopen(f"{live.prometheus}/api/v1/query?{params}", timeout=30) as response:
        answer = json.load(response)
    assert answer["status"] == "success", (expr, answer)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def run_queries(url: str, seconds: float, clients: int = 4) -> int:
    """`clients` threads run the queries to the end, over and over, for `seconds`: pages answered."""

    def client() -> int:
        deadline, pages = time.monotonic() + seconds, 0
        while time.monotonic() < deadline:
            for query in QUERIES:
                body: dict[str, str] = {"query": query}
                while True:
                    request = urllib.request.Request(
                        url, json.dumps(body).encode(), {"content-type": "application/json"}
                    )
                    try:
                        with urllib.request.urlopen(request, timeout=30) as response:
                            page = json.load(response)
                    except urllib.error.HTTPError:
                        break
                    pages += 1
                    if page["next"] is None:
                        break
                    body = {"next": page["next"]}
            # the same join through /sparql, whose completed queries measure the progress estimate's error
            form = urllib.parse.urlencode({"query": QUERIES[1]}).encode()
            sparql = urllib.request.Request(url.split("/v1/")[0] + "/sparql/watdiv", form, {"accept": "text/csv"})
            try:
                with urllib.request.urlopen(sparql, timeout=30) as response:
                    response.read()
            except urllib.error.HTTPError:
                pass  # past /sparql's fair use (429): the next round tries again
        return pages

    with ThreadPoolExecutor(clients) as pool:
        return sum(pool.map(lambda _: client(), range(clients)))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    prometheus = shutil.which("prometheus") or str(Path.home() / ".cache/quanta/k8s/bin/prometheus")
    if not Path(prometheus).exists():
        if os.environ.get("QUANTA_K8S_REQUIRED") == "1":
            pytest.fail("prometheus is missing: scripts/k8s/tools.sh static")
        pytest.skip("prometheus is missing: scripts/k8s/tools.sh static")
    folder = tmp_path_factory.mktemp("live")
    shutil.copy(SAMPLE, folder / "watdiv-100k.hdt")
    (folder / "catalog.toml").write_text(
        '[datasets.watdiv]\npath = "watdiv-100k.hdt"\nquantum_ms = 3\nmax_results = 200\n'
    )
    gateway_port, prom_port = free_port(), free_port()
    worker_ports = [free_port(), free_port()]
    procs: list[subprocess.Popen[bytes]] = []
    with redis_server() as redis:
        env = {**os.environ, "QUANTA_REDIS_URL": redis.url, "QUANTA_CATALOG": str(folder / "catalog.toml"),
               "QUANTA_SECRET_KEYS": "live:0123456789abcdef0123", "QUANTA_RATE_LIMIT": "0"}  # fmt: skip
        quanta = [sys.executable, "-m", "quanta.cli.main"]
        try:
            for i, port in enumerate(worker_ports):
                procs.append(subprocess.Popen([*quanta, "worker", "--name", f"live-{i}", "--metrics-port", str(port)],
                                              env=env, stderr=subprocess.DEVNULL))  # fmt: skip
            procs.append(subprocess.Popen([*quanta, "gateway", "--port", str(gateway_port)], env=env,
                                          stderr=subprocess.DEVNULL))  # fmt: skip
            assert wait_ready(f"http://127.0.0.1:{gateway_port}", procs[-1]), "the gateway did not get ready"
            config = {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "gateway", "static_configs": [{"targets": [f"127.0.0.1:{gateway_port}"]}]},
                    {"job_name": "worker", "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in worker_ports]}]},
                ],
            }
            (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
            procs.append(subprocess.Popen(
                [prometheus, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"], stderr=subprocess.DEVNULL))  # fmt: skip
            start = time.time()
            pages = run_queries(f"http://127.0.0.1:{gateway_port}/v1/datasets/watdiv/query", LOAD_SECONDS)
            assert pages > 100
            time.sleep(3)  # the last scrapes
            yield Live(f"http://127.0.0.1:{prom_port}", start, time.time())
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=30)


def dashboard_targets() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for path in DASHBOARDS for p in json.loads(path.read_text())["panels"]
            for t in p["targets"]]  # fmt: skip


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(quanta_[a-z_]+)", expr))


def test_prometheus_scraped_the_gateway_and_both_workers(live: Live) -> None:
    up = {r["metric"]["instance"]: r["value"][1] for r in promql(live, "up")}
    assert len(up) == 3 and set(up.values()) == {"1"}


def test_every_metric_the_dashboards_and_alerts_name_is_exported(live: Live, render) -> None:
    with urllib.request.urlopen(f"{live.prometheus}/api/v1/label/__name__/values", timeout=30) as response:
        exported = set(json.load(response)["data"])
    rules = [d for d in render({"monitoring": {"prometheusRule": {"enabled": True}}}) if d["kind"] == "PrometheusRule"]
    alert_exprs = [r["expr"] for g in rules[0]["spec"]["groups"] for r in g["rules"]]
    named = set().union(*(metric_names(e) for _, e in dashboard_targets()), *(metric_names(e) for e in alert_exprs))
    assert len(named) >= 20
    assert named - exported == set()


@pytest.mark.parametrize(("title", "expr"), dashboard_targets())
def test_every_panel_query_gives_data(live: Live, title: str, expr: str) -> None:
    assert promql(live, expr.replace("$__rate_interval", "10s")), f"{title}: no data for {expr}"


def test_each_dashboard_is_drawn_from_the_stored_series(live: Live, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "render_dashboards", ROOT / "scripts" / "k8s" / "render_dashboards.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = ROOT / "docs" / "img" if os.environ.get("QUANTA_RENDER_DOCS") == "1" else tmp_path
    for path in DASHBOARDS:
        picture = module.render(json.loads(path.read_text()), live.prometheus, live.start, live.end, out, rate="10s")
        assert picture.stat().st_size > 20_000  # lines were drawn, not empty axes
