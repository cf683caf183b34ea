"""The smart client's expressions keep their term table bounded in characters, not only in
terms (a computed term may have a million characters: MAX_LITERAL_CHARS), and a value computed
when the table is replaced is read from the table it was computed in."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from quanta.client.ops import expr
from quanta.sparql.parse import read
from quanta.sparql.syntax import Var


@dataclass
class Width:
    width: int


def concat_bang() -> expr.ClientExpr:
    algebra = read('SELECT ((CONCAT(?a, "!")) AS ?r) WHERE {}').algebra.algebra.p.p.expr
    return expr.ClientExpr(algebra, lambda v: 0 if v == Var("a") else None, Width(1), None)


@pytest.mark.parametrize("size", [10, 1000])
def test_the_table_is_replaced_by_characters_and_values_stay_right(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    monkeypatch.setattr(expr, "TABLE_CHARS", 5000)
    bound = concat_bang()
    peak = 0
    for i in range(40):
        text = f"{i:04d}" + "a" * size
        assert bound.value((f'"{text}"',)) == f'"{text}!"'
        peak = max(peak, bound.table.extra_chars)
    assert peak <= 5000 + 4 * (size + 10)


def test_the_default_bound() -> None:
    assert expr.TABLE_CHARS == 4 << 20
