"""The catalog: which dataset /sparql serves, and the query page's examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from quanta.common.catalog import (
    CatalogError,
    Example,
    default_dataset,
    load_catalog,
    parse_catalog,
    single_dataset_catalog,
    write_catalog,
)


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


def test_examples_in_a_file_or_in_the_catalog_and_back(tmp_path: Path) -> None:
    (tmp_path / "a.examples.toml").write_text('[[example]]\nname = "one"\nquery = """SELECT *\nWHERE {}"""\n')
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        '[datasets.a]\npath = "a.hdt"\nexamples = "a.examples.toml"\n'
        '[datasets.b]\npath = "b.hdt"\n[[datasets.b.examples]]\nname = "two"\nquery = "ASK {}"\n'
    )
    datasets = load_catalog(catalog)
    assert datasets["a"].examples == (Example("one", "SELECT *\nWHERE {}"),)
    assert datasets["b"].examples == (Example("two", "ASK {}"),)
    write_catalog(datasets, tmp_path / "written.toml")
    assert load_catalog(tmp_path / "written.toml") == datasets
    # `quanta up --dataset a=FILE.hdt` takes FILE.examples.toml beside it
    assert single_dataset_catalog([f"a={tmp_path / 'a.hdt'}"])["a"].examples == datasets["a"].examples


def test_examples_need_a_name_and_a_query(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="each needs a name and a query"):
        parse_catalog({"a": {"path": "a", "examples": [{"name": "x"}]}}, base=tmp_path)
    with pytest.raises(CatalogError, match="examples"):
        parse_catalog({"a": {"path": "a", "examples": "missing.toml"}}, base=tmp_path)


def test_named_graphs_in_the_catalog_and_back(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        '[datasets.a]\npath = "a.hdt"\n[datasets.a.graphs]\n"http://example.org/g1" = "g1.hdt"\n'
        '"http://example.org/g2" = "sub/g2.hdt"\n'
    )
    a = load_catalog(catalog)["a"]
    assert a.graph("http://example.org/g2") == (tmp_path / "sub" / "g2.hdt").resolve()
    assert a.graph("http://example.org/g3") is None
    assert a.public()["graphs"] == ["http://example.org/g1", "http://example.org/g2"]
    write_catalog({"a": a}, tmp_path / "again.toml")
    assert load_catalog(tmp_path / "again.toml")["a"].graphs == a.graphs


def test_a_graph_name_is_an_absolute_iri(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not an absolute IRI"):
        parse_catalog({"a": {"path": "a.hdt", "graphs": {"g1": "g1.hdt"}}}, base=tmp_path)


def test_the_retired_pyhdt_backend_is_still_accepted_and_written_back(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.toml"
    catalog.write_text('[datasets.a]\npath = "a.hdt"\nbackend = "pyhdt"\n[datasets.b]\npath = "b.hdt"\n')
    datasets = load_catalog(catalog)
    assert datasets["a"].backend == "pyhdt" and datasets["b"].backend == ""
    write_catalog(datasets, tmp_path / "written.toml")  # what `quanta up` hands its workers: they warn
    assert load_catalog(tmp_path / "written.toml") == datasets
    with pytest.raises(CatalogError, match=r"backend 'hdt': expected native \(or the retired pyhdt"):
        parse_catalog({"a": {"path": "a.hdt", "backend": "hdt"}}, base=tmp_path)
