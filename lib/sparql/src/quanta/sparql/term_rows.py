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

from collections.abc import Iterable, Iterator, Sequence

Row = tuple[str | None, ...]  # one term per head variable; None = unbound


def encode(rows: Iterable[Sequence[str | None]]) -> tuple[list[str], list[int]]:
    """(terms, cells) of rows."""
    index: dict[str, int] = {}
    cells = [0 if t is None else index.setdefault(t, len(index) + 1) for row in rows for t in row]
    return list(index), cells


def decode(terms: Sequence[str], cells: Sequence[int], width: int, count: int) -> list[Row]:
    """`count` rows of `width` terms. Raises ValueError when the cells do not
    make `count` rows or name a term that is not there."""
    out: list[Row] = []
    for part in slices(terms, cells, width, count, rows=max(count, 1)):
        out += part
    return out


SLICE_ROWS = 256  # rows `slices` decodes at a time


def slices(
    terms: Sequence[str], cells: Sequence[int], width: int, count: int, rows: int = SLICE_ROWS
) -> Iterator[list[Row]]:
    """`decode`'s rows, `rows` at a time, each slice reading only the terms it first uses
    (terms come in order of first use): whoever decodes a large page can do something
    else between slices (the gateway's event loop). ValueError as `decode`, at the
    slice where the cells go wrong."""
    if len(cells) != width * count:
        raise ValueError(f"{len(cells)} cells do not make {count} rows of {width}")
    if width == 0:
        for start in range(0, count, rows):
            yield [()] * min(rows, count - start)
        return
    table: list[str | None] = [None]
    for start in range(0, count, rows):
        part = cells[start * width : min(count, start + rows) * width]
        need = max(part, default=0)
        if need >= len(table):
            if need > len(terms):
                raise ValueError(f"a cell names a term beyond the page's {len(terms)}")
            table += terms[len(table) - 1 : need]
        flat = [table[c] for c in part]
        yield list(zip(*[iter(flat)] * width, strict=True))
