"""Re-records the BSBM qualification reference that tests/bsbm/test_qualification.py compares with.

    .venv/bin/python tests/bsbm/record_reference.py

BSBM's generator (`benchmark.generator.Generator -pc 100 -s nt`: deterministic, it takes no seed)
writes the data and the driver's parameter files; Apache Jena Fuseki (scripts/jena.sh, the dataset
in memory) serves them; BSBM's test driver in qualification mode (`benchmark.testdriver.TestDriver
-q`, seed 808080, 15 query mixes) runs the explore and business-intelligence use cases against it.
Its two qualification files, gzipped, and a manifest (versions, the dump's SHA-256) go to
tests/bsbm/reference/. Needs Java 17 and Maven (scripts/bsbm.sh java installs them as root);
about 30 s. Re-record after changing BSBM's or Jena's version, the scale, the seed or the mixes.

The module also holds what the test shares with it: the tools (`Bsbm`), the generator, the
driver's qualification run and the comparison with BSBM's own `Qualification` tool.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
QUALDUMP = REPO / "bench" / "QualDump.java"  # prints a qualification file as text (bench/bsbm.py's too)
REFERENCE = HERE / "reference"
BSBM_VERSION = os.environ.get("QUANTA_BSBM_VERSION", "3.1.10")  # as scripts/bsbm.sh reads it
JENA_VERSION = os.environ.get("QUANTA_JENA_VERSION", "5.2.0")  # as scripts/jena.sh reads it
PRODUCTS = 100
SEED = 808080  # the driver's default, named so that both runs surely share it
MIXES = 15  # the driver's default in qualification mode
USECASES = {"explore": "usecases/explore/sparql.txt", "bi": "usecases/businessIntelligence/sparql.txt"}
# the driver's messages for a query that failed (it goes on with the next)
DRIVER_ERRORS = re.compile(r"Received error code|Query execution error|Could not connect|Could not read result")


class ToolMissing(RuntimeError):
    """A helper script could not provide its tool (exit 2: not root, no apt-get)."""


def helper(script: str, *args: str) -> str:
    """The path scripts/<script> prints (its last line); ToolMissing or RuntimeError with its reason."""
    done = subprocess.run([str(REPO / "scripts" / script), *args], capture_output=True, text=True)
    if done.returncode == 2:
        raise ToolMissing(done.stderr.strip()[-400:])
    if done.returncode != 0:
        raise RuntimeError(f"scripts/{script} {' '.join(args)} failed ({done.returncode}): {done.stderr[-1000:]}")
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Comparison:
    """What BSBM's `Qualification` tool found: per query, correct and total executions."""

    queries: dict[int, tuple[int, int]]
    ignored: list[int]  # queries the use case leaves out (the tool's "not executed or ignored")
    errors: list[str]  # the tool's "Error: ..." lines (the two runs' setups differ)
    report: str  # the tool's log and output, for a failure's message
    order_only: dict[int, int] = field(default_factory=dict)  # query -> results right but for row order

    @property
    def executions(self) -> int:
        return sum(total for _, total in self.queries.values())

    @property
    def differing(self) -> dict[int, tuple[int, int]]:
        return {q: (c, t) for q, (c, t) in self.queries.items() if c != t}

    def details(self, query: int, limit: int = 3000) -> str:
        """The tool's per-result notes on `query` (which run, which rows)."""
        blocks = re.split(r"\n(?=Result for Query \d+ of run)", self.report.split("Qualification overview:")[0])
        found = [b.strip() for b in blocks if re.match(rf"Result for Query {query} of run", b.strip())]
        return "\n\n".join(found)[:limit]


@dataclass
class Bsbm:
    """BSBM's jars (scripts/bsbm.sh) and the queries and use cases unpacked from them, the driver's
    working folder (its use-case files name the queries by relative paths)."""

    lib: Path
    home: Path

    @classmethod
    def fetch(cls, work: Path) -> Bsbm:
        """The tools, Java and Maven installed first when missing (ToolMissing if they cannot be)."""
        if shutil.which("java") is None:
            helper("bsbm.sh", "java")
        try:
            lib = Path(helper("bsbm.sh", "bsbm"))
        except ToolMissing:  # Maven, needed only to fetch the jars the first time
            helper("bsbm.sh", "java")
            lib = Path(helper("bsbm.sh", "bsbm"))
        home = work / f"bsbm-{BSBM_VERSION}"
        if not (home / "usecases").is_dir():
            home.mkdir(parents=True, exist_ok=True)
            jar = lib / f"bsbm-core-{BSBM_VERSION}.jar"
            subprocess.run(["unzip", "-q", "-o", str(jar), "queries/*", "usecases/*", "-d", str(home)], check=True)
        return cls(lib, home)

    def java(self, main: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> str:
        """A class of the jars run to its end: its output; RuntimeError with it if it fails."""
        done = subprocess.run(
            ["java", "-Xmx1g", "-cp", f"{self.lib}/*", main, *args],
            cwd=cwd or self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} failed ({done.returncode}):\n{output[-3000:]}")
        return output

    def generate(self, into: Path, products: int = PRODUCTS) -> Path:
        """The dump (`dataset.nt`) and the driver's parameter files (`td_data/`) in `into`."""
        into.mkdir(parents=True, exist_ok=True)
        self.java("benchmark.generator.Generator", "-pc", str(products), "-s", "nt", "-fn", "dataset", cwd=into)
        return into

    def qualify(self, url: str, data: Path, usecase: str, qual: Path) -> list[str]:
        """The driver's qualification run of `usecase` against the endpoint `url`, written to `qual`:
        the driver's lines about failed queries (it goes on past them)."""
        qual.unlink(missing_ok=True)
        output = self.java(
            "benchmark.testdriver.TestDriver",
            *("-idir", str(data / "td_data"), "-ucf", (self.home / USECASES[usecase]).as_uri()),
            *("-q", "-qf", str(qual), "-runs", str(MIXES), "-seed", str(SEED), "-t", "60000"),
            url,
        )
        if not qual.exists():
            raise RuntimeError(f"{url}: the driver wrote no qualification file:\n{output[-2000:]}")
        return [line.strip() for line in output.splitlines() if DRIVER_ERRORS.search(line)]

    def compare(self, reference: Path, test: Path, log: Path) -> Comparison:
        """BSBM's `Qualification` tool: `test`'s results against `reference`'s.

        The tool compares in order any result whose query text holds ORDER BY, even in a
        sub-select only (business intelligence Q7, whose outer query is unordered, so any order
        of its rows is right). A query it finds different is compared again from the two files'
        rows (QualDump.java): where every differing result of it has an unordered outer query and
        the same rows, the query counts as right, noted in `order_only` (bench/bsbm.py does the same)."""
        log.unlink(missing_ok=True)
        output = self.java("benchmark.qualification.Qualification", "-ql", str(log), str(reference), str(test))
        text = log.read_text() if log.exists() else ""
        queries: dict[int, tuple[int, int]] = {}
        ignored: list[int] = []
        # the overview, after the per-result notes: one paragraph per query
        overview = text.split("Qualification overview:")[-1] if "Qualification overview:" in text else ""
        for number, rest in re.findall(r"^Query (\d+):(.*)$", overview, re.MULTILINE):
            counts = re.search(r"correct/total executions: (\d+)/(\d+)", rest)
            if counts:
                queries[int(number)] = (int(counts.group(1)), int(counts.group(2)))
            elif "not executed or ignored" in rest:
                ignored.append(int(number))
            else:  # a line this parser does not know: surely not a pass
                queries[int(number)] = (0, -1)
        errors = [line.strip() for line in (output + "\n" + text).splitlines() if line.strip().startswith("Error:")]
        comparison = Comparison(queries, ignored, errors, f"{text}\n{output}")
        if comparison.differing and not errors:
            self._order_only(comparison, reference, test, log.parent)
        return comparison

    def _order_only(self, comparison: Comparison, reference: Path, test: Path, work: Path) -> None:
        expected, got = self.dump(reference, work / "reference.txt"), self.dump(test, work / "test.txt")
        if len(expected) != len(got):
            return
        wrong: Counter[int] = Counter()
        reordered: Counter[int] = Counter()
        for a, b in zip(expected, got, strict=True):
            if (a.query, a.run) != (b.query, b.run):
                return
            if a.timed_out or b.timed_out or a.head != b.head or sorted(a.rows) != sorted(b.rows):
                wrong[a.query] += 1
            elif a.ordered and a.rows != b.rows:  # an unordered result's rows are a multiset
                outer_ordered = "order by" in a.text.rsplit("}", 1)[-1].lower()
                if outer_ordered:
                    wrong[a.query] += 1
                else:
                    reordered[a.query] += 1
        for query, (_, total) in list(comparison.differing.items()):
            if not wrong[query] and reordered[query]:
                comparison.queries[query] = (total, total)
                comparison.order_only[query] = reordered[query]

    def dump(self, qual: Path, out: Path) -> list[Result]:
        """The results a qualification file holds, read by bench/QualDump.java."""
        subprocess.run(
            ["java", "-cp", f"{self.lib}/*", str(QUALDUMP), str(qual), str(out)],
            check=True,
            capture_output=True,
            timeout=120,
        )

        def unescape(text: str) -> str:
            return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text)

        results: list[Result] = []
        for line in out.read_text(encoding="utf-8").splitlines():
            kind, _, rest = line.partition("\t")
            if kind == "R":
                run, query, ordered, timed_out = rest.split("\t")
                results.append(Result(int(run), int(query), ordered == "true", timed_out == "true"))
            elif kind == "Q":
                results[-1].text = unescape(rest)
            elif kind == "H":
                results[-1].head.append(unescape(rest))
            elif kind == "V":
                results[-1].rows.append(unescape(rest))
        return results


@dataclass
class Result:
    """One query execution's result in a qualification file (an unordered one's rows as they come)."""

    run: int
    query: int
    ordered: bool  # the driver's flag: the query text holds ORDER BY
    timed_out: bool
    text: str = ""
    head: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest() -> dict[str, object]:
    """What the recorded reference was made from (reference/manifest.json)."""
    loaded: dict[str, object] = json.loads((REFERENCE / "manifest.json").read_text())
    return loaded


def fuseki(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Fuseki serving the dump from memory, up: its process and SPARQL endpoint."""
    from quanta.common.redis_server import free_port

    jar = helper("jena.sh")
    port = free_port()
    command = ["java", "-Xmx2g", "-jar", jar, "--port", str(port), f"--file={data / 'dataset.nt'}", "/bsbm"]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/bsbm/sparql"
    ask = url + "?" + urllib.parse.urlencode({"query": "ASK {}"})
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(ask, timeout=5) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"Fuseki did not start: {log.read_text()[-2000:]}")
        time.sleep(0.3)


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bsbm-reference-") as tmp:
        work = Path(tmp)
        bsbm = Bsbm.fetch(work)
        data = bsbm.generate(work / "data")
        triples = sum(1 for _ in (data / "dataset.nt").open("rb"))
        process, url = fuseki(data, work / "fuseki.log")
        try:
            files = {}
            for usecase in USECASES:
                qual = work / f"{usecase}.qual"
                failed = bsbm.qualify(url, data, usecase, qual)
                if failed:
                    sys.exit(f"Fuseki failed queries of {usecase}: {failed[:5]}")
                files[usecase] = qual
        finally:
            process.terminate()
            process.wait(timeout=60)
        REFERENCE.mkdir(exist_ok=True)
        for usecase, qual in files.items():
            # mtime 0: the same answers give the same bytes
            with gzip.GzipFile(REFERENCE / f"{usecase}.qual.gz", "wb", compresslevel=9, mtime=0) as out:
                out.write(qual.read_bytes())
        record = {
            "bsbm_version": BSBM_VERSION,
            "products": PRODUCTS,
            "triples": triples,
            "dataset_sha256": sha256(data / "dataset.nt"),
            "seed": SEED,
            "mixes": MIXES,
            "reference": f"Apache Jena Fuseki {JENA_VERSION}, dataset in memory (--file)",
            "recorded": datetime.now(UTC).strftime("%Y-%m-%d"),
            "files": {u: f"{u}.qual.gz" for u in files},
        }
        (REFERENCE / "manifest.json").write_text(json.dumps(record, indent=1) + "\n")
    sizes = ", ".join(f"{p.name} {p.stat().st_size:,} B" for p in sorted(REFERENCE.glob("*.gz")))
    print(f"recorded in {time.monotonic() - started:.0f} s: {sizes}")


if __name__ == "__main__":
    main()
