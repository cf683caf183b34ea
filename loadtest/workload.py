"""WatDiv workloads for the Locust users: the basic mix, the stress mix and the
OPTIONAL mix, each query named after its template and carrying its expected
result count, and a workload of its own for each simulated client (as in
*SaGe: Web Preemption for Public SPARQL Query Services*, where each of the
clients runs a different workload of the same distribution).

    python loadtest/workload.py optional                         # (re)generate the OPTIONAL mix
    python loadtest/workload.py export basic --ntriples watdiv-100k.nt.gz --out FILE.jsonl
                                          # a mix with its counts on other data (pyoxigraph)
    python loadtest/workload.py show basic --client 3            # one client's workload
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any, cast

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads"
OPTIONAL_FILE = WORKLOADS / "optional-watdiv-1m.jsonl"
# ST-p06-08 returns 7,777,986 rows (about 1 GB of JSON): one instance takes a client minutes on
# this machine, so the stress mix leaves it out unless asked (--include-huge).
HUGE = ("ST-p06-08",)


@dataclass(frozen=True, slots=True)
class Query:
    name: str  # its template: "L1", "ST-p06-08", "optional:C2" (the Locust request name)
    id: str  # unique in its mix: "basic/L1_3.rq"
    text: str
    expected: int | None  # result count on watdiv-1m (results.tsv), None when unknown
    seconds: float | None  # the reference engine's time on watdiv-1m (results.tsv): ranks heavy queries


def watdiv_dir() -> Path:
    """The WatDiv folder: $QUANTA_WATDIV, else $QUANTA_SHARED/datasets/watdiv, else a
    `shared/datasets/watdiv` beside the working directory, this file, or a parent of either."""
    if "QUANTA_WATDIV" in os.environ:
        return Path(os.environ["QUANTA_WATDIV"])
    if "QUANTA_SHARED" in os.environ:
        return Path(os.environ["QUANTA_SHARED"]) / "datasets" / "watdiv"
    for base in (Path.cwd(), *Path.cwd().parents, HERE, *HERE.parents):
        if (base / "shared" / "datasets" / "watdiv").is_dir():
            return base / "shared" / "datasets" / "watdiv"
    return Path.cwd() / "shared" / "datasets" / "watdiv"


def ground_truth(folder: Path) -> dict[str, tuple[int, float]]:
    """results.tsv: query file -> (result count, seconds) on watdiv-1m."""
    path = folder / "results.tsv"
    if not path.exists():
        return {}
    with path.open() as f:
        return {
            r["query_file"]: (int(r["result_count"]), float(r["oxigraph_seconds"]))
            for r in csv.DictReader(f, delimiter="\t")
        }


def _from_files(folder: Path, subdir: str, template: Callable[[str], str]) -> list[Query]:
    truth = ground_truth(folder)
    out = []
    for path in sorted((folder / "queries" / subdir).glob("*.rq")):
        key = f"queries/{subdir}/{path.name}"
        count, seconds = truth.get(key, (None, None))
        out.append(Query(template(path.stem), f"{subdir}/{path.name}", path.read_text(), count, seconds))
    return out


def basic(folder: Path) -> list[Query]:
    """The 200 basic queries: 20 templates (L1-L5, S1-S7, F1-F5, C1-C3), 10 instances each."""
    return _from_files(folder, "basic", lambda stem: stem.rsplit("_", 1)[0])


def stress(folder: Path, include_huge: bool = False) -> list[Query]:
    """The stress queries, one per template (ST-pNN-KK: NN triple patterns)."""
    queries = _from_files(folder, "stress", lambda stem: stem.rsplit("_", 1)[0])
    return [q for q in queries if include_huge or q.name not in HUGE]


def optional(folder: Path) -> list[Query]:
    """The OPTIONAL mix: each basic query whose largest triple pattern moves into an OPTIONAL
    (the paper's protocol; quanta.testkit.workloads.optional_variant), expected counts computed
    by pyoxigraph on watdiv-1m (`python loadtest/workload.py optional`)."""
    return read_jsonl(OPTIONAL_FILE)


MIXES = ("basic", "stress", "optional")


def load(mix: str, folder: Path | None = None, *, include_huge: bool = False) -> list[Query]:
    """A mix by name, or a workload file (.jsonl of Query objects) by path."""
    folder = folder or watdiv_dir()
    if mix == "basic":
        return basic(folder)
    if mix == "stress":
        return stress(folder, include_huge)
    if mix == "optional":
        return optional(folder)
    if Path(mix).is_file():
        return read_jsonl(Path(mix))
    raise ValueError(f"unknown workload {mix!r}: {', '.join(MIXES)}, or a .jsonl file")


def read_jsonl(path: Path) -> list[Query]:
    with path.open() as f:
        return [Query(**json.loads(line)) for line in f if line.strip()]


def write_jsonl(queries: list[Query], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for q in queries:
            f.write(json.dumps(asdict(q)) + "\n")


def client_workload(queries: list[Query], client: int, *, seed: int = 0, rounds: int = 1) -> list[Query]:
    """Client `client`'s own workload: `rounds` times each template once, an instance drawn
    at random, in an order of its own (rounds 0: every query of the mix once, shuffled).
    Seeded by (seed, client), so a run is repeatable and every client's workload differs."""
    rng = random.Random(f"{seed}:{client}")
    if rounds <= 0:
        chosen = list(queries)
    else:
        by_template: dict[str, list[Query]] = defaultdict(list)
        for q in queries:
            by_template[q.name].append(q)
        chosen = [rng.choice(instances) for _ in range(rounds) for instances in by_template.values()]
    rng.shuffle(chosen)
    return chosen


def heaviest(queries: list[Query], share: float = 0.2) -> list[Query]:
    """The heaviest `share` of a mix by the reference time (results.tsv): what the ICWE
    paper's loaders run."""
    ranked = sorted(queries, key=lambda q: q.seconds or 0.0, reverse=True)
    return ranked[: max(1, round(len(ranked) * share))]


def _store(ntriples: Path) -> Any:
    """A pyoxigraph store of `ntriples` (.nt or .nt.gz): the independent oracle for counts."""
    import gzip

    import pyoxigraph

    store = pyoxigraph.Store()
    opened = cast(IO[bytes], gzip.open(ntriples) if ntriples.suffix == ".gz" else ntriples.open("rb"))  # noqa: SIM115
    with opened as f:
        store.bulk_load(f, pyoxigraph.RdfFormat.N_TRIPLES)
    return store


def generate_optional(folder: Path, ntriples: Path) -> list[Query]:
    """The OPTIONAL mix from the basic queries, counts from pyoxigraph over `ntriples` (watdiv-1m)."""
    from quanta.testkit.workloads import optional_variant

    store = _store(ntriples)
    patterns: dict[str, int] = {}

    def count(pattern: str) -> int:
        if pattern not in patterns:
            (solution,) = store.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ {pattern} }}")
            patterns[pattern] = int(solution["n"].value)
        return patterns[pattern]

    out = []
    for q in basic(folder):
        text = optional_variant(q.text, count)
        if text is None:
            continue
        rows = len(list(store.query(text)))
        out.append(Query(f"optional:{q.name}", f"optional/{q.id.split('/', 1)[1]}", text, rows, q.seconds))
    return out


def recount(queries: list[Query], ntriples: Path) -> list[Query]:
    """The same queries with their result counts on `ntriples` (pyoxigraph)."""
    store = _store(ntriples)
    return [replace(q, expected=len(list(store.query(q.text)))) for q in queries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("optional", help=f"regenerate {OPTIONAL_FILE.relative_to(HERE.parent)}")
    gen.add_argument("--ntriples", type=Path, help="watdiv-1m N-Triples (default: the WatDiv folder's .nt.gz)")
    export = commands.add_parser("export", help="a mix as a .jsonl workload, counted on other data")
    export.add_argument("mix")
    export.add_argument("--ntriples", type=Path, required=True)
    export.add_argument("--out", type=Path, required=True)
    show = commands.add_parser("show", help="print a client's workload")
    show.add_argument("mix")
    show.add_argument("--client", type=int, default=0)
    show.add_argument("--rounds", type=int, default=1)
    show.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = watdiv_dir()
    if args.command == "optional":
        queries = generate_optional(folder, args.ntriples or folder / "watdiv-1m.nt.gz")
        write_jsonl(queries, OPTIONAL_FILE)
        print(f"{len(queries)} OPTIONAL queries -> {OPTIONAL_FILE}")
    elif args.command == "export":
        queries = recount(load(args.mix, folder), args.ntriples)
        write_jsonl(queries, args.out)
        print(f"{len(queries)} queries -> {args.out}")
    else:
        for q in client_workload(load(args.mix, folder), args.client, seed=args.seed, rounds=args.rounds):
            print(f"{q.name}\t{q.id}\t{q.expected}")


if __name__ == "__main__":
    main()
