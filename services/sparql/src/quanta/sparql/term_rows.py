"""A page's rows as terms, compactly: each distinct term once, then one small
integer per cell. What a worker sends when the gateway, rather than the worker,
writes the results (any format), or runs a client-side plan over them.

    terms  the distinct terms of the page (dictionary syntax), in order of first use
    cells  row after row, one per head variable: 0 unbound, i > 0 is terms[i - 1]

Pages repeat terms (a subject per row of its triples, a handful of
predicates), so this is smaller than the rows written out, and whoever reads
it handles each distinct term once (`quanta.queue.v1.TermRows` carries it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Row = tuple[str | None, ...]  # one term per head variable; None = unbound


def encode(rows: Iterable[Sequence[str | None]]) -> tuple[list[str], list[int]]:
    """(terms, cells) of rows."""
    index: dict[str, int] = {}
    cells = [0 if t is None else index.setdefault(t, len(index) + 1) for row in rows for t in row]
    return list(index), cells


def decode(terms: Sequence[str], cells: Sequence[int], width: int, count: int) -> list[Row]:
    """`count` rows of `width` terms. Raises ValueError when the cells do not
    make `count` rows or name a term that is not there."""
    if len(cells) != width * count:
        raise ValueError(f"{len(cells)} cells do not make {count} rows of {width}")
    if width == 0:
        return [()] * count
    table: list[str | None] = [None, *terms]
    try:
        flat = [table[c] for c in cells]
    except IndexError:
        raise ValueError(f"a cell names a term beyond the page's {len(terms)}") from None
    return list(zip(*[iter(flat)] * width, strict=True))
