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
