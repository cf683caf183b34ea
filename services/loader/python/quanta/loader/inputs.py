"""Input files: format from the extension, compression from the magic bytes, and an estimate of
the uncompressed size (the memory model is in terms of uncompressed bytes)."""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"

# extension (after any .gz) -> converter format name
FORMATS: dict[str, str] = {
    ".nt": "nt",
    ".ntriples": "nt",
    ".nq": "nq",
    ".nquads": "nq",
    ".ttl": "ttl",
    ".turtle": "ttl",
}

# Compressed bytes decompressed to measure a gzip file's ratio when its trailer is ambiguous.
SAMPLE_COMPRESSED = 4 << 20


class InputError(Exception):
    """An input that cannot be loaded at all (missing, unreadable, unknown format)."""


@dataclass(frozen=True)
class Source:
    path: Path
    format: str  # nt | nq | ttl
    gzip: bool
    bytes: int  # on disk
    uncompressed_bytes: int  # estimated for gzip, exact otherwise

    @classmethod
    def probe(cls, name: str) -> Source:
        path = Path(name)
        if not path.is_file():
            raise InputError(f"{name}: no such file")
        suffixes = [s.lower() for s in path.suffixes]
        if suffixes and suffixes[-1] in (".gz", ".gzip"):
            suffixes.pop()
        fmt = FORMATS.get(suffixes[-1]) if suffixes else None
        if fmt is None:
            known = ", ".join(FORMATS)
            raise InputError(f"{name}: cannot tell the RDF format from the extension (known: {known}, optionally .gz)")
        try:
            with open(path, "rb") as f:
                gzip = f.read(2) == GZIP_MAGIC
        except OSError as e:
            raise InputError(f"{name}: {e.strerror}") from e
        size = path.stat().st_size
        return cls(path, fmt, gzip, size, gzip_uncompressed_size(path) if gzip else size)


def gzip_uncompressed_size(path: Path) -> int:
    """Estimated uncompressed size of a gzip file.

    The trailer's ISIZE is the size modulo 2**32 (of the last member only), so it is exact for
    small single-member files and ambiguous beyond 4 GiB; a ratio measured on the first few MB
    picks the right multiple of 2**32, and stands alone when the trailer disagrees with it."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - 4))
        isize = int.from_bytes(f.read(4), "little")
        f.seek(0)
        chunk = f.read(SAMPLE_COMPRESSED)
    produced = _decompressed_length(chunk)
    if size <= SAMPLE_COMPRESSED:
        return produced  # the whole file was decompressed
    by_ratio = produced / max(1, len(chunk)) * size
    candidates = [isize + k * (1 << 32) for k in range(int(2 * by_ratio) // (1 << 32) + 2)]
    best = min(candidates, key=lambda c: abs(c - by_ratio))
    return int(best if abs(best - by_ratio) <= 0.5 * by_ratio else by_ratio)


def _decompressed_length(chunk: bytes) -> int:
    """Bytes that `chunk` (the start of a gzip file, possibly of several members) expands to."""
    produced = 0
    decompressor = zlib.decompressobj(wbits=31)
    data = chunk
    try:
        while data:
            produced += len(decompressor.decompress(data, 1 << 24))
            data = decompressor.unconsumed_tail
            if decompressor.eof:
                data = decompressor.unused_data
                decompressor = zlib.decompressobj(wbits=31)
    except zlib.error:
        pass  # damaged or trailing garbage: the converter will report it; the estimate stands
    return produced


def absolute(path: Path) -> str:
    """Absolute path without resolving symlinks (what the user named)."""
    return os.path.abspath(path)
