"""Fixtures: real HDT files and pyoxigraph as the independent engine."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyoxigraph as ox
import pytest

from quanta.engine.storage import TripleStore, open_store
from quanta.testkit.data import shared_dir, write_hdt
from quanta.testkit.engine import engine_and_reference
from quanta.testkit.oracle import oxigraph_store

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
WATDIV = shared_dir() / "datasets" / "watdiv"


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[[str], TripleStore]:
    """Build a store from N-Triples text."""
    counter = iter(range(1_000_000))

    def make(ntriples: str) -> TripleStore:
        return open_store(str(write_hdt(ntriples, tmp_path, f"g{next(counter)}")), name="test")

    return make


@pytest.fixture(scope="session")
def watdiv_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample dataset, copied (the store writes a side index beside it)."""
    copy = tmp_path_factory.mktemp("watdiv") / "watdiv-100k.hdt"
    shutil.copy(SAMPLE, copy)
    return copy


@pytest.fixture(scope="session")
def watdiv_store(watdiv_copy: Path) -> TripleStore:
    return open_store(str(watdiv_copy), name="watdiv-100k")


@pytest.fixture(scope="session")
def watdiv_oxigraph() -> ox.Store:
    source = WATDIV / "watdiv-100k.nt.gz"
    if not source.exists():
        pytest.skip(f"shared WatDiv data not found at {WATDIV} (set QUANTA_SHARED)")
    return oxigraph_store(source)


@pytest.fixture(scope="session")
def small_graph() -> str:
    """A deterministic little graph with every kind of term, shared subjects
    and objects, several values per predicate, literals and a blank node."""
    lines = []
    ex = "http://example.org/"
    for i in range(12):
        s = f"<{ex}s{i}>"
        lines.append(f"{s} <{ex}type> <{ex}T{i % 3}> .")
        lines.append(f"{s} <{ex}knows> <{ex}s{(i * 5 + 1) % 12}> .")
        if i % 2:
            lines.append(f"{s} <{ex}knows> <{ex}s{(i + 3) % 12}> .")
            lines.append(f"{s} <{ex}tag> <{ex}T{i % 2}> .")
        lines.append(f'{s} <{ex}age> "{20 + i}"^^<http://www.w3.org/2001/XMLSchema#integer> .')
        lines.append(f'{s} <{ex}name> "name {i}"@{"en" if i % 3 else "fr"} .')
        if i % 4 == 0:
            lines.append(f'{s} <{ex}note> "n{i}" .')
            lines.append(f"{s} <{ex}self> {s} .")
    # scores equal in value to ages, written otherwise (FILTER(?age = ?score) holds, sameTerm does not)
    xsd = "http://www.w3.org/2001/XMLSchema#"
    lines.append(f'<{ex}s0> <{ex}score> "25"^^<{xsd}decimal> .')
    lines.append(f'<{ex}s2> <{ex}score> "22"^^<{xsd}integer> .')
    lines.append(f'<{ex}s3> <{ex}score> "x" .')
    lines.append(f"<{ex}s4> <{ex}score> <{ex}s5> .")
    lines.append(f"_:b1 <{ex}knows> <{ex}s1> .")
    lines.append(f'_:b1 <{ex}note> "blank" .')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def small_stores(tmp_path_factory: pytest.TempPathFactory, small_graph: str) -> tuple[TripleStore, ox.Store]:
    """`small_graph` as an HDT file opened by the engine, and in pyoxigraph."""
    return engine_and_reference(small_graph, tmp_path_factory.mktemp("small"), "small")
