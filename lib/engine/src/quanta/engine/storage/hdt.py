"""TripleStore over an HDT file through pyHDT (hdt-cpp 1.3.3).

HDT numbers terms per position: subjects and objects share ids 1..nb_shared,
then subject-only and object-only ids overlap, and predicates have their own
range. The engine wants one id per term, so:

    subject id s           -> s
    object id o <= shared  -> o
    object id o > shared   -> o + (nb_subjects - nb_shared)
    predicate id p         -> the term's subject/object id if it has one,
                              else nb_terms + p

Resume cost of `search(..., offset)` (measured in docs/benchmarks.md): constant
for every shape but `?P?`, whose skip walks the predicate's occurrences
(~2 ns per entry skipped), and `S?O`, which walks the subject's triples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import hdt

from quanta.engine.storage import Triple
from quanta.engine.storage.version import META_SUFFIX, file_version
from quanta.sparql.terms import spellings

SUBJECT = hdt.IdentifierPosition.Subject
PREDICATE = hdt.IdentifierPosition.Predicate
OBJECT = hdt.IdentifierPosition.Object

__all__ = ["META_SUFFIX", "HdtStore", "file_version"]


class HdtStore:
    """A memory-mapped HDT file with its side index (`.hdt.index.v1-1`)."""

    backend = "pyhdt"

    def __init__(self, path: str, name: str | None = None) -> None:
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        self.path = path
        self.name = name or Path(path).stem
        self.version = file_version(path)
        self.doc = doc = hdt.HDTDocument(path)
        self.triples = doc.total_triples
        self.nb_subjects = doc.nb_subjects
        self.nb_shared = doc.nb_shared
        # object-only ids are shifted past the subject ids
        self.object_shift = doc.nb_subjects - doc.nb_shared
        self.nb_terms = doc.nb_subjects + doc.nb_objects - doc.nb_shared
        self.predicate_gid = [0] + [self._canonical_predicate(p) for p in range(1, doc.nb_predicates + 1)]
        self.gid_predicate = {g: p for p, g in enumerate(self.predicate_gid) if p}
        self._extract_cache: dict[int, str] = {}

    def _canonical_predicate(self, pid: int) -> int:
        term = self.doc.convert_id(pid, PREDICATE)
        return self._so_gid(term) or self.nb_terms + pid

    def _so_gid(self, term: str) -> int:
        sid = self._term_id(term, SUBJECT)
        if sid:
            return sid
        oid = self._term_id(term, OBJECT)
        return self.object_gid(oid) if oid else 0

    def _term_id(self, term: str, position: hdt.IdentifierPosition) -> int:
        try:
            return int(self.doc.convert_term(term, position))
        except RuntimeError:
            # hdt-cpp 1.3.3 throws when a lookup falls through to an empty
            # dictionary section (and so on every lookup when no term is both
            # subject and object): find the term by bisection instead.
            return self._bisect(term, position)

    def _bisect(self, term: str, position: hdt.IdentifierPosition) -> int:
        """Sections are sorted by their UTF-8 bytes (= code points)."""
        last = self.nb_subjects if position == SUBJECT else self.doc.nb_objects
        for lo, hi in ((1, self.nb_shared), (self.nb_shared + 1, last)):
            while lo <= hi:
                mid = (lo + hi) // 2
                found = self.doc.convert_id(mid, position)
                if found == term:
                    return int(mid)
                lo, hi = (mid + 1, hi) if found < term else (lo, mid - 1)
        return 0

    def object_gid(self, oid: int) -> int:
        return oid if oid <= self.nb_shared else oid + self.object_shift

    # -- position ids for a global id; -1 when the term never occurs there --

    def _subject_id(self, gid: int) -> int:
        return gid if 0 <= gid <= self.nb_subjects else -1

    def _object_id(self, gid: int) -> int:
        if gid <= self.nb_shared:
            return gid if gid >= 0 else -1
        if self.nb_subjects < gid <= self.nb_terms:
            return int(gid - self.object_shift)
        return -1

    def _predicate_id(self, gid: int) -> int:
        return self.gid_predicate.get(gid, -1) if gid else 0

    # -- TripleStore --

    def search(self, s: int, p: int, o: int, offset: int = 0) -> Iterator[Triple]:
        sid, pid, oid = self._subject_id(s), self._predicate_id(p), self._object_id(o)
        if sid < 0 or pid < 0 or oid < 0:
            return iter(())
        try:
            found, _ = self.doc.search_triples_ids(sid, pid, oid, 0, offset)
        except RuntimeError:
            if not offset:
                raise
            return iter(())  # hdt-cpp throws when asked to skip past the end
        if s and p and o:
            return ((s, p, o) for _ in found)  # found holds position ids: the pattern is the triple
        return map(self._translator(s, p, o), found)

    def _translator(self, s: int, p: int, o: int):  # type: ignore[no-untyped-def]
        """A function from HDT id triples to global id triples; only the
        variable positions need translating."""
        shared, shift, pg = self.nb_shared, self.object_shift, self.predicate_gid
        if o:
            return lambda t: (t[0], pg[t[1]], o)
        if p:
            return lambda t: (t[0], p, t[2] if t[2] <= shared else t[2] + shift)
        return lambda t: (t[0], pg[t[1]], t[2] if t[2] <= shared else t[2] + shift)

    def estimate(self, s: int, p: int, o: int) -> int:
        sid, pid, oid = self._subject_id(s), self._predicate_id(p), self._object_id(o)
        if sid < 0 or pid < 0 or oid < 0:
            return 0
        found, cardinality = self.doc.search_triples_ids(sid, pid, oid)
        if s and o and not p:
            # hdt-cpp reports the subject's size for S?O: count (out-degree bound)
            return sum(1 for _ in found)
        return int(cardinality)

    def distinct_subjects(self, p: int) -> int:
        # counted by reading the predicate's triples (a reference, not a fast path)
        return len({t[0] for t in self.search(0, p, 0)}) if p else 0

    def sorted_by_subject(self, s: int, p: int, o: int) -> bool:
        # SPO order for ???/S??/SP?/SPO/S?O; the predicate index (?P?) and the
        # object index for ?PO list subjects in ascending order; ??O is
        # ordered by predicate first.
        return not (o and not s and not p)

    def constant_skip(self, s: int, p: int, o: int) -> bool:
        # ?P? walks the predicate's occurrences to skip (~2 ns an entry), S?O
        # walks the subject's triples; every other shape jumps.
        return not (p and not s and not o) and not (s and o and not p)

    def locate(self, term: str) -> int:
        for spelling in spellings(term):
            gid = self._so_gid(spelling)
            if gid:
                return gid
            pid = self._term_id(spelling, PREDICATE)
            if pid:
                return self.predicate_gid[pid]
        return 0

    def extract(self, gid: int) -> str:
        term = self._extract_cache.get(gid)
        if term is None:
            if gid <= self.nb_subjects:
                term = self.doc.convert_id(gid, SUBJECT)
            elif gid <= self.nb_terms:
                term = self.doc.convert_id(gid - self.object_shift, OBJECT)
            else:
                term = self.doc.convert_id(gid - self.nb_terms, PREDICATE)
            if len(self._extract_cache) < 1_000_000:
                self._extract_cache[gid] = term
        return term
