"""The catalog: which dataset /sparql serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from quanta.common.catalog import CatalogError, default_dataset, load_catalog, parse_catalog, write_catalog


def test_the_default_dataset_is_the_marked_one_else_the_first(tmp_path: Path) -> None:
    plain = parse_catalog({"b": {"path": "b.hdt"}, "a": {"path": "a.hdt"}}, base=tmp_path)
    assert default_dataset(plain).name == "b"
    marked = parse_catalog({"b": {"path": "b.hdt"}, "a": {"path": "a.hdt", "default": True}}, base=tmp_path)
    assert default_dataset(marked).name == "a"
    write_catalog(marked, tmp_path / "catalog.toml")
    assert default_dataset(load_catalog(tmp_path / "catalog.toml")).name == "a"


def test_one_default_at_most(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="several datasets marked default"):
        parse_catalog({"a": {"path": "a", "default": True}, "b": {"path": "b", "default": True}}, base=tmp_path)
