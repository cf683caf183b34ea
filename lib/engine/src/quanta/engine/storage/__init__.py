"""The engine's only view of storage: triples by integer ids.

Ids are *global*: one integer per RDF term whatever position it occupies, so
joins and FILTER equality compare integers. 0 is the wildcard in a pattern
(and "unbound" in a mapping); negative ids are terms outside the dictionary
(see `quanta.sparql.term_table.TermTable`) and never match a triple.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from quanta.sparql.term_table import TermTable

Triple = tuple[int, int, int]


class TripleStore(Protocol):
    """Read-only access to one dataset file, and the running of plans over it:
    `storage.native`, over the native core. (`storage.hdt`, over pyHDT, reads
    the same files with the same ids: the reference the tests compare the
    native store's reading with; the engine does not run on it.)"""

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

    def distinct_subjects(self, p: int) -> int:
        """How many distinct subjects have predicate `p` (exact)."""
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

    def object_string_range(self, low: bytes, high: bytes) -> tuple[int, int]:
        """The object-only terms whose dictionary strings lie in [low, high) (byte order):
        their global ids [start, end)."""
        ...

    def object_range_count(self, start: int, end: int, p: int) -> int | None:
        """How many triples of predicate `p` (0: any) have an object in the global ids
        [start, end); None when the range spans too many objects to be read as one."""
        ...

    def extract(self, gid: int) -> str:
        """Dictionary string of a global id."""
        ...

    def pipeline(self, width: int, spec: tuple[Any, ...], terms: TermTable | None = None) -> Any:
        """A plan (`quanta.engine.operators.native.spec`) ready to run over this
        file: `quanta.native._core.Pipeline`; `terms`, the plan's term table,
        holds the terms outside the dictionary (and those it computes)."""
        ...

    def decode_rows(self, rows: Any, projection: list[int], extra: list[str]) -> list[tuple[str | None, ...]]:
        """Rows of ids projected and decoded (negative ids: `extra[-id - 1]`)."""
        ...

    def render(self, fmt: str, keys: list[bytes], rows: Any, projection: list[int], extra: list[str]) -> bytes:
        """Rows of ids projected and written in a results format (`quanta.native._core`)."""
        ...


BACKENDS = ("native",)
RETIRED_BACKENDS = ("pyhdt",)  # still accepted in settings: the engine runs on the native store
DEFAULT_BACKEND = "native"
BACKEND_ENV = "QUANTA_BACKEND"


def backend_name(backend: str | None = None) -> str:
    """The backend to use: `backend` if given, else $QUANTA_BACKEND, else the
    default (`native`). A retired one (`pyhdt`: the engine once ran on pyHDT)
    is read as the native store, which reads the same files with the same ids,
    with a warning."""
    chosen = backend or os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND
    if chosen in RETIRED_BACKENDS:
        _warn_retired(chosen)
        return DEFAULT_BACKEND
    if chosen not in BACKENDS:
        raise ValueError(f"unknown storage backend {chosen!r} (expected one of {', '.join(BACKENDS)})")
    return chosen


@functools.cache
def _warn_retired(backend: str) -> None:
    import logging  # here: a fresh `quanta query` does without it

    logging.getLogger("quanta.engine.storage").warning(
        "the storage backend is retired: the engine runs on the native store (same files, same ids)",
        extra={"backend": backend},
    )


def side_index_path(path: str) -> str:
    """Where the native store keeps the side index of an HDT file (built on first
    open when missing: `quanta load` builds it, a worker that finds it missing
    builds it under a lock)."""
    return path + ".quanta-index.v1"  # quanta.native.INDEX_SUFFIX


def open_store(path: str, name: str | None = None, backend: str | None = None) -> TripleStore:
    """Open a dataset file (`backend`: see `backend_name`)."""
    backend_name(backend)
    from quanta.engine.storage.native import NativeStore

    return NativeStore(path, name=name)
