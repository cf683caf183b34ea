"""The engine's only view of storage: triples by integer ids.

Ids are *global*: one integer per RDF term whatever position it occupies, so
joins and FILTER equality compare integers. 0 is the wildcard in a pattern
(and "unbound" in a mapping); negative ids are terms outside the dictionary
(see `quanta.engine.plan.TermTable`) and never match a triple.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

Triple = tuple[int, int, int]


class TripleStore(Protocol):
    """Read-only access to one dataset file. Another backend implements this."""

    name: str
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


def open_store(path: str, name: str | None = None) -> TripleStore:
    """Open a dataset file (HDT is the one backend today)."""
    from quanta.engine.storage.hdt import HdtStore

    return HdtStore(path, name=name)
