"""The identity of a dataset file build, which saved plans carry (any backend)."""

from __future__ import annotations

import hashlib
import json
import os

META_SUFFIX = ".meta.json"  # written by `quanta load`; holds the build's version id


def file_version(path: str) -> int:
    """64-bit fingerprint of the file build: the loader's version id when there
    is a metadata file beside the HDT, else a digest of the file's bytes."""
    meta = path + META_SUFFIX  # os.path, not pathlib: see quanta.engine.storage.native
    if os.path.exists(meta):
        with open(meta) as f:
            return int(json.load(f)["version_id"][:16], 16)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return int(digest.hexdigest()[:16], 16)
