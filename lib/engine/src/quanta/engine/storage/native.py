"""TripleStore over an HDT file through quanta's native core (`quanta.native`,
Rust): the file and its side index (`FILE.hdt.quanta-index.v1`) are
memory-mapped, so workers on one machine share their pages, and every scan
resumes from its offset in constant time (`?P?` included) but `S?O`, which
walks the subject's pairs. Global ids and orders are pyHDT's
(`quanta.engine.storage.hdt`, the reference the tests compare it with).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from quanta.engine.storage import Triple
from quanta.engine.storage.version import file_version
from quanta.native import INDEX_SUFFIX, NativeHdt, build_index
from quanta.sparql.terms import spellings

LOCATED = 65_536  # terms whose id a store remembers (a query's constants repeat: predicates, types)


def index_path(path: str) -> str:
    return path + INDEX_SUFFIX


def ensure_index(path: str) -> str:
    """The side index of `path`, built if missing (written under a temporary
    name and renamed, so concurrent builders never see half a file)."""
    index = index_path(path)
    if not os.path.exists(index):
        build_index(path, index)
    return index


class NativeStore:
    """A memory-mapped HDT file and its side index."""

    backend = "native"

    def __init__(self, path: str, name: str | None = None) -> None:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        self.path = path
        # os.path: importing pathlib would cost a fresh `quanta query` several ms
        self.name = name or os.path.splitext(os.path.basename(path))[0]
        self.version = file_version(path)
        self.hdt = hdt = NativeHdt(path, ensure_index(path))
        self.triples = hdt.triples
        self.nb_subjects = hdt.nb_subjects
        self.nb_shared = hdt.nb_shared
        self.nb_terms = hdt.nb_subjects + hdt.nb_objects - hdt.nb_shared
        # bound methods, so the engine's hot paths make one call
        self.search_from = hdt.search
        self.estimate = hdt.estimate  # type: ignore[method-assign]
        self.distinct_subjects = hdt.distinct_subjects  # type: ignore[method-assign]
        self.object_string_range = hdt.object_string_range  # type: ignore[method-assign]
        self.object_range_count = hdt.object_range_count  # type: ignore[method-assign]
        self.extract = hdt.extract  # type: ignore[method-assign]
        self.extract_many = hdt.extract_many
        self.pipeline = hdt.pipeline
        self.decode_rows = hdt.decode_rows
        self.render = hdt.render
        self._located: dict[str, int] = {}

    def search(self, s: int, p: int, o: int, offset: int = 0) -> Iterator[Triple]:
        return self.hdt.search(s, p, o, offset)

    def estimate(self, s: int, p: int, o: int) -> int:
        return self.hdt.estimate(s, p, o)

    def distinct_subjects(self, p: int) -> int:
        return self.hdt.distinct_subjects(p)

    def object_string_range(self, low: bytes, high: bytes) -> tuple[int, int]:
        return self.hdt.object_string_range(low, high)

    def object_range_count(self, start: int, end: int, p: int) -> int | None:
        return self.hdt.object_range_count(start, end, p)

    def sorted_by_subject(self, s: int, p: int, o: int) -> bool:
        # as pyHDT: ??O is ordered by predicate first; every other shape by subject
        return not (o and not s and not p)

    def constant_skip(self, s: int, p: int, o: int) -> bool:
        # only S?O walks (the subject's pairs); ?P? jumps with the side index
        return not (s and o and not p)

    def locate(self, term: str) -> int:
        gid = self._located.get(term)
        if gid is None:
            gid = next((g for g in map(self.hdt.locate, spellings(term)) if g), 0)
            if len(self._located) >= LOCATED:
                self._located.clear()  # a file's dictionary never changes: forgetting only costs lookups
            self._located[term] = gid
        return gid

    def extract(self, gid: int) -> str:
        return self.hdt.extract(gid)
