"""The dataset catalog: one TOML file naming every dataset the service serves.

[datasets.watdiv-100k]
path = "data/watdiv-100k.hdt"     # relative to the catalog file
description = "WatDiv, 104,072 triples"
quantum_ms = 75
max_results = 100000              # rows per page at most
max_page_bytes = 1048576          # JSON results per page, about (the quantum ends a page too)
plan_mode = "auto"                # auto | value | reference
plan_threshold_bytes = 4096       # auto: by value up to this size
backend = "native"                # storage backend: native, the only one (default: $QUANTA_BACKEND, else native;
                                  # "pyhdt" is retired: still accepted, runs on the native store, logs a warning)
default = true                    # the dataset of the SPARQL endpoint's /sparql (else the first listed)
examples = "watdiv-100k.examples.toml"  # the query page's example queries: a file of them (relative
                                  # to the catalog), or the list itself ([[datasets.NAME.examples]])

[datasets.watdiv-100k.graphs]     # named graphs, each an HDT file of its own (relative to the catalog)
"http://example.org/graphs/extra" = "data/extra.hdt"

An examples file holds `[[example]]` tables, each a `name` and a `query`.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

PLAN_MODES = ("auto", "value", "reference")
BACKENDS = ("", "native")  # as quanta.engine.storage.BACKENDS; "" = not set
# As quanta.engine.storage.RETIRED_BACKENDS: still accepted, so existing catalogs keep working;
# the workers open the native store (same files, same ids) and log a warning.
RETIRED_BACKENDS = ("pyhdt",)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Example:
    """An example query the query page offers for a dataset."""

    name: str
    query: str


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    path: Path
    description: str = ""
    quantum_ms: float = 75.0  # `inf`: never suspend (first come, first served)
    # A page ends with the quantum, at about max_page_bytes of JSON results, or
    # at max_results rows, whichever comes first (the byte budget, not the row
    # cap, bounds a page of a fast query).
    max_results: int = 100_000
    max_page_bytes: int = 1 << 20
    plan_mode: str = "auto"
    # As "To Ship or Not to (Function) Ship" argues: ship the state while it is small,
    # keep it server-side when sending it back and forth costs more than a
    # Redis round trip. Saved plans are ~100-300 B on WatDiv, so "auto" sends
    # nearly every plan by value; large VALUES blocks or wide plans go by reference.
    plan_threshold_bytes: int = 4096
    # storage backend (quanta.engine.storage.BACKENDS, or a retired one, RETIRED_BACKENDS, which
    # runs on the native store); "" = $QUANTA_BACKEND or the engine's default
    backend: str = ""
    # The dataset /sparql queries (at most one; none marked: the first in the catalog).
    default: bool = False
    examples: tuple[Example, ...] = ()
    # Named graphs beside the default graph: (IRI, HDT file) pairs. Each file is
    # its own store: a saved plan names its store, so it resumes on that graph only.
    graphs: tuple[tuple[str, Path], ...] = ()

    def graph(self, iri: str) -> Path | None:
        """The file of a named graph; None if the dataset has no graph of that IRI."""
        return next((path for name, path in self.graphs if name == iri), None)

    def store_name(self, graph: str | None = None) -> str:
        """The name a store of the default graph (None) or of a named graph is opened under: a
        saved plan names its store, so a plan saved on one graph resumes on no other."""
        return self.name if graph is None else f"{self.name} <{graph}>"

    def public(self) -> dict[str, object]:
        """What GET /v1/datasets shows (never the file path)."""
        return {
            "name": self.name,
            "description": self.description,
            "quantum_ms": self.quantum_ms,
            "max_results": self.max_results,
            "plan_mode": self.plan_mode,
            "examples": [{"name": e.name, "query": e.query} for e in self.examples],
            "graphs": [iri for iri, _ in self.graphs],
        }


class CatalogError(ValueError):
    pass


def load_catalog(path: str | Path) -> dict[str, Dataset]:
    """Read and validate a catalog file; paths are relative to it."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CatalogError(f"{path}: {error}") from error
    return parse_catalog(data.get("datasets", {}), base=path.parent, origin=str(path))


def parse_catalog(entries: dict[str, dict[str, object]], base: Path, origin: str = "catalog") -> dict[str, Dataset]:
    datasets = {}
    known = set(Dataset.__dataclass_fields__) - {"name"}
    for name, entry in entries.items():
        if not NAME.match(name):
            raise CatalogError(f"{origin}: dataset name {name!r} must match {NAME.pattern}")
        unknown = set(entry) - known
        if unknown:
            raise CatalogError(f"{origin}: dataset {name}: unknown keys {sorted(unknown)}")
        if "path" not in entry:
            raise CatalogError(f"{origin}: dataset {name}: `path` is required")
        values = dict(entry)
        values["path"] = (base / str(values["path"])).resolve()
        if "examples" in values:
            values["examples"] = _examples(values["examples"], base, f"{origin}: dataset {name}")
        if "graphs" in values:
            values["graphs"] = _graphs(values["graphs"], base, f"{origin}: dataset {name}")
        dataset = Dataset(name=name, **values)  # type: ignore[arg-type]
        if dataset.plan_mode not in PLAN_MODES:
            raise CatalogError(f"{origin}: dataset {name}: plan_mode must be one of {PLAN_MODES}")
        if dataset.backend not in BACKENDS + RETIRED_BACKENDS:
            raise CatalogError(
                f"{origin}: dataset {name}: backend {dataset.backend!r}: expected {' or '.join(BACKENDS[1:])}"
                f" (or the retired {' or '.join(RETIRED_BACKENDS)}, which runs on the native store)"
            )
        if dataset.quantum_ms <= 0 or dataset.max_results <= 0 or dataset.max_page_bytes <= 0:
            raise CatalogError(f"{origin}: dataset {name}: quantum_ms, max_results and max_page_bytes must be positive")
        datasets[name] = dataset
    if not datasets:
        raise CatalogError(f"{origin}: no datasets")
    marked = [name for name, d in datasets.items() if d.default]
    if len(marked) > 1:
        raise CatalogError(f"{origin}: several datasets marked default: {marked}")
    return datasets


def _examples(value: object, base: Path, origin: str) -> tuple[Example, ...]:
    """Examples given in the catalog, or in the file it names (relative to it)."""
    if isinstance(value, str):
        path = base / value
        try:
            value = tomllib.loads(path.read_text()).get("example", [])
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise CatalogError(f"{origin}: examples: {error}") from error
        origin = f"{origin}: {path}"
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise CatalogError(f"{origin}: examples: expected a file name or a list of tables")
    try:
        return tuple(Example(name=str(e["name"]), query=str(e["query"])) for e in value)
    except KeyError as missing:
        raise CatalogError(f"{origin}: examples: each needs a name and a query (missing {missing})") from None


def _graphs(value: object, base: Path, origin: str) -> tuple[tuple[str, Path], ...]:
    """Named graphs: a table of absolute IRIs to HDT files (relative to the catalog)."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise CatalogError(f"{origin}: graphs: expected a table of graph IRIs to HDT files")
    for iri in value:
        if ":" not in iri or any(c in iri for c in ' <>"{}|^`\\'):
            raise CatalogError(f"{origin}: graphs: {iri!r} is not an absolute IRI")
    return tuple((iri, (base / file).resolve()) for iri, file in value.items())


def default_dataset(datasets: dict[str, Dataset]) -> Dataset:
    """The dataset marked `default = true`, else the first one listed."""
    return next((d for d in datasets.values() if d.default), next(iter(datasets.values())))


def single_dataset_catalog(specs: list[str]) -> dict[str, Dataset]:
    """`NAME=FILE.hdt` specs (from `quanta up --dataset`) as a catalog; a
    `FILE.examples.toml` beside a file gives its examples."""
    entries: dict[str, dict[str, object]] = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep:
            raise CatalogError(f"--dataset {spec!r}: expected NAME=FILE.hdt")
        entries[name] = {"path": file}
        examples = Path(file).with_suffix(".examples.toml")
        if examples.is_file():
            entries[name]["examples"] = str(examples.resolve())
    return parse_catalog(entries, base=Path.cwd(), origin="--dataset")


def write_catalog(datasets: dict[str, Dataset], path: Path) -> None:
    """Write a catalog file (e.g. `quanta up` hands one to its workers)."""
    lines = []
    for d in datasets.values():
        lines += [
            f"[datasets.{json.dumps(d.name)}]",  # JSON strings are TOML basic strings
            f"path = {json.dumps(str(d.path))}",
            f"description = {json.dumps(d.description)}",
            f"quantum_ms = {'inf' if d.quantum_ms == float('inf') else d.quantum_ms}",
            f"max_results = {d.max_results}",
            f"max_page_bytes = {d.max_page_bytes}",
            f'plan_mode = "{d.plan_mode}"',
            f"plan_threshold_bytes = {d.plan_threshold_bytes}",
            *([f'backend = "{d.backend}"'] if d.backend else []),
            *(["default = true"] if d.default else []),
            "",
        ]
        if d.graphs:
            lines += [f"[datasets.{json.dumps(d.name)}.graphs]"]
            lines += [f"{json.dumps(iri)} = {json.dumps(str(path))}" for iri, path in d.graphs]
            lines += [""]
        for example in d.examples:
            lines += [
                f"[[datasets.{json.dumps(d.name)}.examples]]",
                f"name = {json.dumps(example.name)}",
                f"query = {json.dumps(example.query)}",
                "",
            ]
    path.write_text("\n".join(lines))
