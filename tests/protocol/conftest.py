"""A running service for the protocol and real-client tests: a redis-server, a
`quanta worker` and a `quanta gateway` process on a free port, serving the
WatDiv sample (`watdiv`, the default dataset, at a 5 ms quantum: answers span
quanta) and the W3C protocol tests' data (`protocol`: an empty default graph, and
the named graphs the tests name: data1 to data3 as the manifest gives them, and
data0, which the tests name as a default graph but never give, empty)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox
import pytest

from quanta.common.redis_server import RedisServer, free_port, wait_ready
from quanta.engine.storage import open_store
from quanta.testkit.data import shared_dir, write_hdt
from quanta.testkit.oracle import oxigraph_store

REPO = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "quanta.cli.main"]
WATDIV = shared_dir() / "datasets" / "watdiv" / "watdiv-100k.nt.gz"
PROTOCOL = shared_dir() / "conformance" / "w3c-rdf-tests" / "sparql" / "sparql11" / "protocol"
KASEI = "http://kasei.us/2009/09/sparql/data/"


@dataclass
class Running:
    url: str  # the gateway, e.g. http://127.0.0.1:PORT

    def endpoint(self, dataset: str = "watdiv") -> str:
        return f"{self.url}/sparql/{dataset}"


@pytest.fixture(scope="session")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("protocol")
    shutil.copy(REPO / "data" / "watdiv-100k.hdt", folder / "watdiv.hdt")
    write_hdt(b"", folder, "empty")
    graphs = []
    for i in range(4):  # the protocol tests' graphs: data1-3 as given, data0 (named, never given) empty
        data = (PROTOCOL / f"data{i}.nt").read_bytes() if i else b""
        write_hdt(data, folder, f"data{i}")
        graphs.append(f'"{KASEI}data{i}.rdf" = "data{i}.hdt"')
    for name in ("watdiv", "empty", "data0", "data1", "data2", "data3"):
        open_store(str(folder / f"{name}.hdt"))  # side indexes, before the worker starts
    catalog = folder / "catalog.toml"
    catalog.write_text(
        '[datasets.watdiv]\npath = "watdiv.hdt"\nquantum_ms = 5\nmax_results = 100\ndefault = true\n'
        '[datasets.protocol]\npath = "empty.hdt"\n[datasets.protocol.graphs]\n' + "\n".join(graphs) + "\n"
    )
    redis = RedisServer().start()
    port = free_port()
    env = {
        **os.environ, "QUANTA_REDIS_URL": redis.url, "QUANTA_CATALOG": str(catalog), "QUANTA_ACCESS_LOG": "0",
        "QUANTA_SECRET_KEYS": "protocol:0123456789abcdef0123456789", "QUANTA_SPARQL_QUERY_RATE": "0",
    }  # fmt: skip
    log = (folder / "service.log").open("wb")
    worker = subprocess.Popen([*COMMAND, "worker"], env=env, stderr=log)
    gateway = subprocess.Popen([*COMMAND, "gateway", "--port", str(port)], env=env, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_ready(url, gateway), f"the service did not start: see {folder / 'service.log'}"
        yield Running(url)
    finally:
        for process in (gateway, worker):
            process.terminate()
            process.wait(timeout=20)
        redis.stop()
        log.close()


@pytest.fixture(scope="session")
def watdiv() -> ox.Store:
    """The oracle: pyoxigraph over the same triples."""
    store = oxigraph_store(WATDIV)
    return store
