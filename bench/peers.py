"""SPARQL servers on this machine, for the benchmarks that set quanta beside its peers.

Each `start_*` loads an N-Triples file with the system's own loader (timed), starts its server
inside an `ExitStack` (stopped when the stack closes) and returns a `Server`: its SPARQL endpoint's
URL, the root of its processes, how it was loaded, its settings in a sentence.

- quanta: `quanta load` to HDT (or an HDT file served as given), then `quanta up`;
- Apache Jena Fuseki (scripts/jena.sh, from Maven Central): `tdb2.tdbloader` to TDB2, or in memory;
- Oxigraph's server (scripts/bsbm.sh oxigraph, PyPI `oxigraph`): `oxigraph load` to RocksDB,
  then `serve-read-only`;
- Virtuoso (scripts/bsbm.sh virtuoso: Debian's package, as root): its server with a generated
  `virtuoso.ini`, loaded by `ld_dir` + `rdf_loader_run()` + `checkpoint` through isql.

Used by bench/bsbm.py and bench/sparql.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchlib  # bench/, the script's own folder

from quanta.common.redis_server import free_port

REPO = benchlib.REPO
OXIGRAPH_VERSION = os.environ.get("QUANTA_OXIGRAPH_VERSION", "0.5.13")
JENA_VERSION = os.environ.get("QUANTA_JENA_VERSION", "5.2.0")
GRAPH = "http://bsbm.example/"  # Virtuoso's graph for the data (a query without FROM reads every graph)


@dataclass
class Server:
    """A SPARQL endpoint on this machine: its URL, the root of its processes, how it was loaded."""

    name: str
    url: str
    pid: int
    load: dict[str, Any]
    settings: str
    memory: dict[str, Any] = field(default_factory=dict)


# ---- tools -----------------------------------------------------------------------------------


def helper(*args: str, env: dict[str, str] | None = None) -> str:
    """What scripts/bsbm.sh or scripts/jena.sh prints (a path), or RuntimeError with its reason."""
    done = subprocess.run(
        [str(REPO / "scripts" / args[0]), *args[1:]], capture_output=True, text=True, env=env and {**os.environ, **env}
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()[-400:]}")
    return done.stdout.strip().splitlines()[-1]


def measure(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall time and peak resident memory of a command (GNU time: this process's own peak is not
    inherited at exec as ru_maxrss would be); its stdout. RuntimeError if it fails."""
    timed = os.access("/usr/bin/time", os.X_OK)
    with tempfile.TemporaryDirectory(prefix="quanta-measure-") as scratch:
        report = Path(scratch) / "time.txt"
        full = ["/usr/bin/time", "-f", "%e %M", "-o", str(report), *cmd] if timed else cmd
        started = time.perf_counter()
        done = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({done.returncode}): {done.stderr[-1000:]}")
        peak = None
        if timed:
            elapsed, max_kb = report.read_text().split()[-2:]
            wall, peak = float(elapsed), int(max_kb) * 1024
    return {"seconds": round(wall, 2), "peak_rss_bytes": peak, "stdout": done.stdout}


def tree(root: int) -> list[int]:
    """`root` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, ppid = int(stat.parent.name), int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def memory(root: int) -> dict[str, int]:
    """Resident (RSS) and proportional (PSS: a page shared by n processes counts 1/n) bytes of a
    process tree, and the sum of each process's own peak RSS (VmHWM)."""
    rss = pss = hwm = 0
    for pid in tree(root):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            continue
    return {"rss_bytes": rss, "pss_bytes": pss, "hwm_bytes": hwm}


class Sampler:
    """The largest RSS and PSS of each server's processes, sampled every `interval` seconds, or
    less often when a sample takes long: reading PSS walks every mapped page (at 100 M triples
    a round took half a core every 0.5 s), so sampling takes a tenth of one core at most."""

    def __init__(self, servers: list[Server], interval: float = 0.5) -> None:
        self.servers, self.interval = servers, interval
        self.peak: dict[str, dict[str, int]] = {s.name: {"rss_bytes": 0, "pss_bytes": 0} for s in servers}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        wait = self.interval
        while not self.done.wait(wait):
            started = time.thread_time()
            for server in self.servers:
                now = memory(server.pid)
                for key in ("rss_bytes", "pss_bytes"):
                    self.peak[server.name][key] = max(self.peak[server.name][key], now[key])
            wait = max(self.interval, 10 * (time.thread_time() - started))

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()


def wait_sparql(url: str, process: subprocess.Popen[bytes], timeout: float = 600) -> None:
    """Until `url` answers `ASK {}`; RuntimeError if the process exits or the time runs out."""
    deadline = time.monotonic() + timeout
    query = url + "?" + urllib.parse.urlencode({"query": "ASK {}"})
    while True:
        try:
            request = urllib.request.Request(query, headers={"Accept": "application/sparql-results+xml"})
            with urllib.request.urlopen(request, timeout=10) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited ({process.returncode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}: no answer after {timeout:.0f} s")
        time.sleep(0.3)


@contextmanager
def running(command: list[str], log: Path, **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A server process, its output to `log`, stopped (then killed) on the way out."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, **kwargs)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def du(path: Path) -> int:
    """Bytes on disk of the files under `path` (or of the file): blocks, since TDB2's files are sparse."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files)


# ---- the systems -----------------------------------------------------------------------------


def start_quanta(
    stack: ExitStack,
    source: Path,
    out: Path,
    *,
    workers: int = 2,
    gateways: int = 1,
    quantum_ms: float = 75,
    dataset: str = "bsbm",
    max_memory: str | None = None,
    redis_url: str | None = None,
    env: Mapping[str, str] = {},
) -> Server:
    """`quanta up` serving `source` as `dataset` (on `redis_url`, else a Redis of its own): an
    N-Triples file is first loaded by `quanta load` (within `max_memory`, else the memory available)
    to `out/<dataset>.hdt`; an `.hdt` file is served as it is (its side index is written beside it)."""
    if source.suffix == ".hdt":
        hdt = source
        load: dict[str, Any] = {"loader": "none (the HDT file as given)", "store_bytes": du(hdt)}
    else:
        hdt = out / f"{dataset}.hdt"
        budget = ["--max-memory", max_memory] if max_memory else []
        m = measure([sys.executable, "-m", "quanta.cli.main", "load", str(source), "-o", str(hdt), *budget])
        summary = json.loads(m.pop("stdout"))
        load = {
            **m,
            "loader": "quanta load (N-Triples to HDT + side index)",
            "store_bytes": summary["hdt_bytes"] + summary["index_bytes"],
            # its reader and the converter run at once: their sum, as the loader measures it
            "peak_rss_bytes": summary["peak_memory_bytes"],
            "largest_process_rss_bytes": m["peak_rss_bytes"],
            "estimated_peak_bytes": summary["estimated_peak_memory_bytes"],
            "memory_estimate": summary["memory_estimate"],
            "max_memory": max_memory or "the memory available",
            "hdt_bytes": summary["hdt_bytes"],
            "index_bytes": summary["index_bytes"],
            "hdt": str(hdt),
        }
    port = free_port()
    env = {
        **os.environ,
        "QUANTA_DEV": "1",
        "QUANTA_SPARQL_QUERY_RATE": "0",
        "QUANTA_SPARQL_MAX_QUERIES": "0",
        "QUANTA_RATE_LIMIT": "0",
        "QUANTA_MAX_CLIENT_TASKS": "1000000",
        "QUANTA_ACCESS_LOG": "0",
        **env,
    }
    command = [sys.executable, "-m", "quanta.cli.main", "up", "--port", str(port), "--workers", str(workers),
               "--gateways", str(gateways), "--quantum-ms", str(quantum_ms),
               "--dataset", f"{dataset}={hdt}"]  # fmt: skip
    if redis_url:  # a Redis of the caller's, to read its statistics
        command += ["--redis-url", redis_url]
    process = stack.enter_context(running(command, out / "quanta.log", env=env))
    url = f"http://127.0.0.1:{port}/sparql/{dataset}"
    wait_sparql(url, process, timeout=300)
    settings = (
        f"`quanta up`, {gateways} gateway process{'es' if gateways > 1 else ''}, {workers} workers, "
        f"{quantum_ms:g} ms quantum, the HDT file memory-mapped "
        "(no memory setting); the per-client limits of `/sparql` lifted (every client is 127.0.0.1)"
    )
    return Server("quanta", url, process.pid, load, settings)


def start_fuseki(
    stack: ExitStack,
    ntriples: Path,
    out: Path,
    *,
    storage: str = "tdb2",
    heap: str = "4g",
    dataset: str = "bsbm",
    version: str = JENA_VERSION,
) -> Server:
    """Fuseki `version` over `ntriples`: `storage` "tdb2" (tdb2.tdbloader, then the server on the
    database) or "memory" (the server reads the file at start)."""
    jar = helper("jena.sh", env={"QUANTA_JENA_VERSION": version})
    out, ntriples = out.resolve(), ntriples.resolve()  # the server runs in `out`
    port = free_port()
    xmx = f"-Xmx{heap}"
    if storage == "tdb2":
        db = out / "fuseki-tdb2"
        shutil.rmtree(db, ignore_errors=True)
        m = measure(["java", xmx, "-cp", jar, "tdb2.tdbloader", "--loc", str(db), str(ntriples)])
        m.pop("stdout")
        load = {**m, "loader": "tdb2.tdbloader (default loader) to a TDB2 database", "store_bytes": du(db)}
        command = ["java", xmx, "-jar", jar, "--port", str(port), f"--loc={db}", f"/{dataset}"]
        settings = f"Fuseki {version}, TDB2 database (memory-mapped files), JVM heap {xmx}"
    else:
        load = {"loader": "Fuseki --file (in memory, at start)", "store_bytes": None}
        command = ["java", xmx, "-jar", jar, "--port", str(port), f"--file={ntriples}", f"/{dataset}"]
        settings = f"Fuseki {version}, dataset in memory, JVM heap {xmx}"
    started = time.perf_counter()
    # its working directory: Fuseki writes its run/ area (configuration, backups) there
    process = stack.enter_context(running(command, out / "fuseki.log", cwd=out))
    url = f"http://127.0.0.1:{port}/{dataset}/sparql"
    wait_sparql(url, process)
    if storage == "memory":
        load |= {"seconds": round(time.perf_counter() - started, 2), "peak_rss_bytes": memory(process.pid)["rss_bytes"]}
    return Server("fuseki", url, process.pid, load, settings)


def start_oxigraph(stack: ExitStack, ntriples: Path, out: Path) -> Server:
    """Oxigraph's server (PyPI `oxigraph` OXIGRAPH_VERSION) over `ntriples`, loaded to RocksDB."""
    binary = helper("bsbm.sh", "oxigraph")
    db = out / "oxigraph"
    shutil.rmtree(db, ignore_errors=True)
    m = measure([binary, "load", "--location", str(db), "--file", str(ntriples)])
    m.pop("stdout")
    load = {**m, "loader": "oxigraph load to RocksDB", "store_bytes": du(db)}
    port = free_port()
    command = [binary, "serve-read-only", "--location", str(db), "--bind", f"127.0.0.1:{port}"]
    process = stack.enter_context(running(command, out / "oxigraph.log"))
    url = f"http://127.0.0.1:{port}/query"
    wait_sparql(url, process)
    settings = f"Oxigraph {OXIGRAPH_VERSION} (`oxigraph serve-read-only`), RocksDB's defaults (no memory setting)"
    return Server("oxigraph", url, process.pid, load, settings)


VIRTUOSO_INI = """[Database]
DatabaseFile = {db}/virtuoso.db
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
MaxCheckpointRemap = 2000
Striping = 0
TempStorage = TempDatabase
[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping = 0
[Parameters]
ServerPort = {isql}
DisableUnixSocket = 1
MaxClientConnections = 100
CheckpointInterval = 60
CaseMode = 2
DirsAllowed = ., {data}
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {dirty}
MaxQueryMem = 2G
ThreadsPerQuery = {threads}
AsyncQueueMaxThreads = 10
[HTTPServer]
ServerPort = {http}
ServerRoot = /var/lib/virtuoso-opensource-7/vsp
MaxClientConnections = 100
ServerThreads = 100
MaxKeepAlives = 100
KeepAliveTimeout = 10
EnabledGzipContent = 0
Charset = UTF-8
[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryCostEstimationTime = {max_estimate_s}
MaxQueryExecutionTime = {max_seconds}
"""


def start_virtuoso(
    stack: ExitStack, ntriples: Path, out: Path, *, gb: float = 2, graph: str = GRAPH,
    max_rows: int | None = None, max_seconds: int | None = None,
) -> Server:  # fmt: skip
    """Virtuoso's server in `out/virtuoso` with `gb` GB of buffers, `ntriples` loaded into `graph`
    by its bulk loader. `max_rows`, `max_seconds`: a row cap and an execution time limit, as
    public endpoints set them (DBpedia: 10,000 rows, 120 s, and queries estimated to take over
    twice the limit refused); None: none. A query stopped by either gets what it found so far,
    with 200 OK (Virtuoso's "anytime" answers)."""
    binary = helper("bsbm.sh", "virtuoso")
    isql_binary = shutil.which("isql-vt") or "isql-vt"
    db = out / "virtuoso"
    shutil.rmtree(db, ignore_errors=True)
    db.mkdir(parents=True)
    isql_port, http_port = free_port(), free_port()
    # virtuoso.ini's own table: 85,000 8 KiB buffers per GB given to it, 3/4 of them dirty at most
    buffers = int(gb * 85_000)
    ini = VIRTUOSO_INI.format(
        db=db,
        isql=isql_port,
        http=http_port,
        data=ntriples.parent,
        buffers=buffers,
        dirty=buffers * 3 // 4,
        threads=os.cpu_count() or 2,
        max_rows=max_rows or 100_000_000,
        max_seconds=max_seconds or 0,
        max_estimate_s=2 * max_seconds if max_seconds else 0,
    )
    (db / "virtuoso.ini").write_text(ini)
    process = serve_virtuoso(stack, db, out / "virtuoso.out")
    deadline = time.monotonic() + 120

    def isql(statements: str) -> str:
        done = subprocess.run(
            [isql_binary, str(isql_port), "dba", "dba", f"exec={statements}"],
            capture_output=True,
            text=True,
            timeout=7200,
        )
        if done.returncode != 0 or "*** Error" in done.stdout:
            raise RuntimeError(f"isql: {(done.stdout + done.stderr)[-600:]}")
        return done.stdout

    while True:
        try:
            isql("status();")
            break
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Virtuoso did not start: {error}") from None
            time.sleep(0.5)
    started = time.perf_counter()
    peak = [0]

    def sample() -> None:
        while process.poll() is None and not done.is_set():
            peak[0] = max(peak[0], memory(process.pid)["rss_bytes"])
            done.wait(0.5)

    done = threading.Event()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        isql(f"ld_dir('{ntriples.parent}', '{ntriples.name}', '{graph}'); rdf_loader_run(); checkpoint;")
    finally:
        done.set()
        sampler.join()
    seconds = time.perf_counter() - started
    failed = isql("select count(*) from DB.DBA.load_list where ll_state <> 2 or ll_error is not null;")
    if not re.search(r"^\s*0\s*$", failed, re.MULTILINE):
        raise RuntimeError(f"Virtuoso's loader reported a failed file: {failed[-400:]}")
    load = {
        "seconds": round(seconds, 2),
        "peak_rss_bytes": peak[0],
        "store_bytes": du(db / "virtuoso.db"),
        "loader": "ld_dir + rdf_loader_run() + checkpoint (isql), into the running server",
    }
    url = f"http://127.0.0.1:{http_port}/sparql"
    wait_sparql(url, process)
    settings = (
        f"Virtuoso {_virtuoso_version(binary)}, NumberOfBuffers {buffers:,} (8 KiB each: "
        f"{gb:g} GB by virtuoso.ini's table), MaxDirtyBuffers {buffers * 3 // 4:,}, "
        "MaxQueryMem 2G, "
        + (f"ResultSetMaxRows {max_rows:,}" if max_rows else "no row cap")
        + (f", MaxQueryExecutionTime {max_seconds} s, MaxQueryCostEstimationTime {2 * max_seconds} s"
           if max_seconds else ", no execution time limit")
    )  # fmt: skip
    return Server("virtuoso", url, process.pid, load, settings)


def serve_virtuoso(stack: ExitStack, db: Path, log: Path) -> subprocess.Popen[bytes]:
    """Virtuoso's server over the database in `db` (its virtuoso.ini there) until `stack` closes."""
    binary = helper("bsbm.sh", "virtuoso")
    return stack.enter_context(running([binary, "-f", "-c", str(db / "virtuoso.ini")], log, cwd=db))


def _virtuoso_version(binary: str) -> str:
    done = subprocess.run([binary, "-?"], capture_output=True, text=True)
    found = re.search(r"Version (\S+)", done.stdout + done.stderr)
    return found.group(1) if found else "7"
