"""The native store against pyHDT (hdt-cpp), the reference: for every pattern
shape and every class of offset (start, middle, end, past the end, random),
the same triples in the same order, the same estimates, and the same terms
for the same ids. On the in-repo watdiv-100k, and on the shared watdiv-1m and
watdiv-10m (slow)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import pytest

pytest.importorskip("hdt", reason="pyHDT (quanta-engine[pyhdt]) is the reference")

from quanta.engine.storage.hdt import HdtStore
from quanta.engine.storage.native import NativeStore

Pattern = tuple[int, int, int]
SHAPES = ("???", "S??", "SP?", "SPO", "?P?", "?PO", "??O", "S?O")
DATASETS = [
    pytest.param(("watdiv-100k", 60), id="watdiv-100k"),
    pytest.param(("watdiv-1m", 25), id="watdiv-1m", marks=pytest.mark.slow),
    pytest.param(("watdiv-10m", 12), id="watdiv-10m", marks=pytest.mark.slow),
]
COMPARED = 200  # triples compared after each offset (all of them for small results)


@pytest.fixture(scope="module", params=DATASETS)
def stores(request: pytest.FixtureRequest, copied: Callable[[str], Path]) -> tuple[HdtStore, NativeStore, int]:
    name, samples = request.param
    path = str(copied(name))
    return HdtStore(path, name=name), NativeStore(path, name=name), samples


def shape_of(pattern: Pattern) -> str:
    return "".join(c if v else "?" for c, v in zip("SPO", pattern, strict=True))


def patterns(reference: HdtStore, samples: int, seed: int = 13) -> Iterator[Pattern]:
    """Patterns of every shape built from triples sampled over the whole file,
    every predicate for ?P?, and patterns with no match."""
    rng = random.Random(seed)
    total = reference.triples
    picked = [next(reference.search(0, 0, 0, rng.randrange(total))) for _ in range(samples)]
    yield (0, 0, 0)
    for s, p, o in picked:
        yield from ((s, 0, 0), (s, p, 0), (s, p, o), (0, p, o), (0, 0, o), (s, 0, o))
    for pid in range(1, reference.doc.nb_predicates + 1):
        p = reference.predicate_gid[pid]
        yield (0, p, 0)
        # the first and last subjects with p, and their neighbours: the store's span of p's
        # subjects (a lookup outside it answers at once) must hold exactly these
        first = next(reference.search(0, p, 0))
        last = next(reference.search(0, p, 0, reference.estimate(0, p, 0) - 1))
        for s, _, o in (first, last):
            yield from ((s, p, 0), (s, p, o), (s - 1, p, 0), (s + 1, p, 0), (s + 1, p, o))
    s, p, o = picked[0]
    yield from ((o + 1, p, 0), (0, p, s), (s, 0, s), (-1, 0, 0), (0, 0, -2))


def offsets(count: int, rng: random.Random) -> list[int]:
    """start, middle, end, past the end, and random offsets"""
    chosen = {0, 1, count // 2, max(count - 1, 0), count, count + 3}
    chosen.update(rng.randrange(count) for _ in range(3) if count)
    return sorted(chosen)


def test_every_shape_and_offset_matches_pyhdt(stores) -> None:
    reference, native, samples = stores
    rng = random.Random(7)
    seen = set()
    for pattern in patterns(reference, samples):
        seen.add(shape_of(pattern))
        count = reference.estimate(*pattern)
        assert native.estimate(*pattern) == count, pattern
        for offset in offsets(count, rng):
            expected = list(islice(reference.search(*pattern, offset), COMPARED))
            got = list(islice(native.search(*pattern, offset), COMPARED))
            assert got == expected, f"{shape_of(pattern)} {pattern} at offset {offset} of {count}"
    assert seen >= set(SHAPES)


def test_whole_scan_is_identical(stores) -> None:
    reference, native, _ = stores
    n = 0
    for expected, got in zip(reference.search(0, 0, 0), native.search(0, 0, 0), strict=True):
        assert got == expected, n
        n += 1
    assert n == reference.triples == native.triples


def test_every_predicate_and_object_list_is_identical(stores) -> None:
    """?P? for every predicate in full; ??O for (a sample of) every object."""
    reference, native, _ = stores
    for pid in range(1, reference.doc.nb_predicates + 1):
        p = reference.predicate_gid[pid]
        assert list(native.search(0, p, 0)) == list(reference.search(0, p, 0)), p
    objects = range(1, reference.doc.nb_objects + 1)
    step = max(1, len(objects) // 5000)
    for oid in objects[::step]:
        o = reference.object_gid(oid)
        assert list(native.search(0, 0, o)) == list(reference.search(0, 0, o)), o


def test_terms_round_trip_like_pyhdt(stores) -> None:
    reference, native, _ = stores
    rng = random.Random(3)
    assert native.nb_terms == reference.nb_terms
    ids = [rng.randrange(1, reference.nb_terms + 1) for _ in range(3000)]
    ids += [*list(range(1, 50)), reference.nb_shared, reference.nb_shared + 1, reference.nb_subjects]
    ids += [reference.nb_subjects + 1, reference.nb_terms, *reference.predicate_gid[1:]]
    for gid in ids:
        term = reference.extract(gid)
        assert native.extract(gid) == term, gid
        assert native.locate(term) == reference.locate(term) == gid, term
    assert native.extract_many(ids[:100]) == [reference.extract(g) for g in ids[:100]]
    assert native.locate("http://example.org/not-in-the-data") == 0
