"""Data for tests and benchmarks: the project's shared data sets, and HDT files written by the
real converter."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from quanta.loader.build import converter


def shared_dir() -> Path:
    """The project's shared data (WatDiv, W3C tests): $QUANTA_SHARED, or a
    `shared/` folder beside the working directory or one of its parents."""
    if "QUANTA_SHARED" in os.environ:
        return Path(os.environ["QUANTA_SHARED"])
    for base in (Path.cwd(), *Path.cwd().parents):
        if (base / "shared" / "datasets").is_dir():
            return base / "shared"
    return Path.cwd().parent / "shared"


def write_hdt(ntriples: str | bytes, directory: Path, name: str = "data") -> Path:
    """N-Triples -> an HDT file, through the project's HDT writer, `quanta-rdf2hdt`
    (services/loader, built by `make install`): what `quanta load` runs, so tests read
    files exactly as the service's loader writes them."""
    source = directory / f"{name}.nt"
    if isinstance(ntriples, str):
        source.write_text(ntriples)
    else:
        source.write_bytes(ntriples)
    target = directory / f"{name}.hdt"
    subprocess.run(
        [
            converter(),
            "--output",
            str(target),
            "--dataset-iri",
            f"http://example.org/{name}",
            "--input",
            "nt",
            "plain",
            source.as_uri(),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    return target
