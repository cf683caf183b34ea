"""The engine's only view of storage: triples by integer ids.

Ids are *global*: one integer per RDF term whatever position it occupies, so
joins and FILTER equality compare integers. 0 is the wildcard in a pattern
(and "unbound" in a mapping); negative ids are terms outside the dictionary
(see `quanta.sparql.term_table.TermTable`) and never match a triple.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Protocol

Triple = tuple[int, int, int]


class TripleStore(Protocol):
    """Read-only access to one dataset file: `storage.native` (the default)
    and `storage.hdt` (pyHDT, the reference) implement it."""

    name: str
    backend: str  # one of BACKENDS
    version: int  # 64-bit fingerprint of the file build; saved plans carry it
    triples: int

    def search(self, s: int, p: int, o: int, offset: int = 0) -> Iterator[Triple]:
        """Triples matching the pattern (0 = any), skipping the first `offset`
        index entries. Yields global ids, in the index's order."""
        ...

    def estimate(self, s: int, p: int, o: int) -> int:
        """Cardinality estimate of the pattern (exact for most shapes)."""
        ...

    def sorted_by_subject(self, s: int, p: int, o: int) -> bool:
        """Whether `search` yields this pattern's triples in subject-id order."""
        ...

    def constant_skip(self, s: int, p: int, o: int) -> bool:
        """Whether `search(..., offset)` reaches any offset in constant time
        (so a suspended scan of this shape resumes cheaply)."""
        ...

    def locate(self, term: str) -> int:
        """Global id of a term (dictionary syntax), 0 if the dataset lacks it."""
        ...

    def extract(self, gid: int) -> str:
        """Dictionary string of a global id."""
        ...


BACKENDS = ("native", "pyhdt")
DEFAULT_BACKEND = "native"
BACKEND_ENV = "QUANTA_BACKEND"


def backend_name(backend: str | None = None) -> str:
    """The backend to use: `backend` if given, else $QUANTA_BACKEND, else the
    default (`native`; `pyhdt` is the reference implementation, an optional
    dependency kept for tests and comparisons)."""
    chosen = backend or os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND
    if chosen not in BACKENDS:
        raise ValueError(f"unknown storage backend {chosen!r} (expected one of {', '.join(BACKENDS)})")
    return chosen


def available_backends() -> list[str]:
    """The backends this installation can open (pyHDT is optional)."""
    found = ["native"]
    if importlib.util.find_spec("hdt") is not None:
        found.append("pyhdt")
    return found


def side_index_path(path: str, backend: str | None = None) -> str:
    """Where the backend keeps the side index of an HDT file (built on first
    open when missing: `quanta load` builds the native one, a worker that
    finds it missing builds it under a lock)."""
    if backend_name(backend) == "pyhdt":
        return path + ".index.v1-1"  # hdt-cpp's
    return path + ".quanta-index.v1"  # quanta.native.INDEX_SUFFIX


def open_store(path: str, name: str | None = None, backend: str | None = None) -> TripleStore:
    """Open a dataset file with the configured backend (see `backend_name`).
    Both read the same HDT file and give the same ids and orders, so a plan
    saved on one resumes on the other."""
    if backend_name(backend) == "pyhdt":
        try:
            from quanta.engine.storage.hdt import HdtStore
        except ImportError as error:
            raise ValueError("the pyhdt backend needs pyHDT: install quanta-engine[pyhdt]") from error

        return HdtStore(path, name=name)
    from quanta.engine.storage.native import NativeStore

    return NativeStore(path, name=name)
