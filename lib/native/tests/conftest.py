"""Fixtures: real HDT files (the in-repo sample, the shared WatDiv files),
copied to a temporary directory before any backend opens them (pyHDT and the
native store both write their side index beside the file)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from quanta.testkit.data import shared_dir

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "watdiv-100k.hdt"
WATDIV = shared_dir() / "datasets" / "watdiv"


def dataset_file(name: str) -> Path:
    return SAMPLE if name == "watdiv-100k" else WATDIV / f"{name}.hdt"


@pytest.fixture(scope="session")
def copied(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A private copy of a WatDiv HDT file, made once per session."""
    copies: dict[str, Path] = {}

    def copy(name: str) -> Path:
        if name not in copies:
            source = dataset_file(name)
            if not source.exists():
                pytest.skip(f"{source} not found (set QUANTA_SHARED)")
            target = tmp_path_factory.mktemp(name) / source.name
            shutil.copy(source, target)
            copies[name] = target
        return copies[name]

    return copy
