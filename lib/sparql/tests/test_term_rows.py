"""The term-rows page encoding: each distinct term once, then one integer per cell."""

from __future__ import annotations

import pytest

from quanta.sparql import term_rows

ROWS = [
    ("http://ex/s1", '"a"@en', None),
    ("http://ex/s1", '"b"', "_:b"),
    ("http://ex/s2", '"a"@en', None),
    (None, None, None),
]


def test_round_trip() -> None:
    terms, cells = term_rows.encode(ROWS)
    assert terms == ["http://ex/s1", '"a"@en', '"b"', "_:b", "http://ex/s2"]  # first use first, once each
    assert cells == [1, 2, 0, 1, 3, 4, 5, 2, 0, 0, 0, 0]
    assert term_rows.decode(terms, cells, 3, len(ROWS)) == ROWS


def test_rows_without_variables() -> None:
    """SELECT * WHERE {} has one solution and no variable: the count carries it."""
    assert term_rows.encode([(), ()]) == ([], [])
    assert term_rows.decode([], [], 0, 2) == [(), ()]


@pytest.mark.parametrize(("cells", "count"), [([1, 0, 1], 1), ([1, 0], 2), ([1, 9], 1)])
def test_damaged_rows_are_refused(cells: list[int], count: int) -> None:
    with pytest.raises(ValueError):
        term_rows.decode(["http://ex/a"], cells, 2, count)


class Counted(list[str]):
    """Terms that count how many of them were read."""

    read = 0

    def __getitem__(self, index):  # unannotated: list's overloads
        items = super().__getitem__(index)
        Counted.read += len(items) if isinstance(index, slice) else 1
        return items


def test_slices_are_the_rows_and_read_only_the_terms_they_use() -> None:
    """A page decoded a slice at a time (the gateway hands its event loop back between
    slices): the same rows, and each slice reads only the terms it first uses."""
    terms, cells = term_rows.encode(ROWS)
    counted = Counted(terms)
    Counted.read = 0
    slices = term_rows.slices(counted, cells, 3, len(ROWS), rows=1)
    assert next(slices) == ROWS[:1]
    assert Counted.read == 2  # http://ex/s1 and "a"@en, not the page's five terms
    assert [ROWS[0], *[row for part in slices for row in part]] == ROWS
    assert Counted.read == 5
    with pytest.raises(ValueError):
        list(term_rows.slices(["http://ex/a"], [1, 0, 1, 9], 2, 2, rows=1))
