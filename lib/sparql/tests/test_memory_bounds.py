"""What a process keeps after writing or evaluating huge terms: the results writers cache
short terms only, and a term table is freed once nothing uses it (the expressions compiled
against it keep a decoder, which must not keep the table)."""

from __future__ import annotations

import gc
import weakref

import pytest

from quanta.sparql import expressions, results
from quanta.sparql.parse import read
from quanta.sparql.syntax import RdfTerm, Var
from quanta.sparql.term_table import TermTable

HUGE = '"' + "a" * (results.CACHED_CHARS + 1) + '"'
SHORT = '"short"'


@pytest.mark.parametrize("fmt", ["json", "csv", "tsv"])
def test_the_writers_cache_short_terms_only(fmt: str) -> None:
    """An answer of huge literals kept 65,536 of them (key and text) in each writer's cache."""
    cache = {"json": results._json_term_text, "csv": results._csv_cell, "tsv": results._tsv_term}[fmt]
    cache.cache_clear()
    text = results.rows_text(fmt, ["x"], [(HUGE,), (SHORT,), (HUGE,)])
    assert text.count("a" * results.CACHED_CHARS) == 2, "the huge term is written, twice"
    assert cache.cache_info().currsize == 1, "only the short one is kept"


def test_a_term_table_is_freed_once_its_expressions_are() -> None:
    """Without the cyclic collector: a replaced table (a client-side BIND replaces its table
    every few megabytes of computed terms) was kept for good by the decoders' registry."""
    query = read("SELECT ((CONCAT(?x, ?x)) AS ?r) WHERE {}").algebra
    algebra = query.algebra.p.p.expr
    gc.disable()
    try:
        table = TermTable(None)
        proto = expressions.to_proto(algebra, _Scope(), None)
        value = expressions.compile_value(proto, table)
        doubled = table.string(value((table.intern(HUGE),)))
        assert doubled == '"' + "a" * 2 * (results.CACHED_CHARS + 1) + '"'
        gone = weakref.ref(table)
        del table, value
        assert gone() is None, "the table (and its computed terms) outlived its expressions"
    finally:
        gc.enable()


class _Scope:
    """?x is slot 0; the expression has no constant."""

    def slot(self, var: Var) -> int | None:
        return 0 if str(var) == "x" else None

    def term(self, node: RdfTerm) -> int:
        raise AssertionError(node)
