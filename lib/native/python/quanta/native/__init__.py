"""quanta's native storage core (Rust, PyO3): an HDT file and its side index
memory-mapped and shared between processes, cursors whose whole state is an
offset, and native execution of scans and joins. See lib/native/README.md."""

from quanta.native._core import INDEX_SUFFIX, NativeHdt, TripleCursor, build_index

__all__ = ["INDEX_SUFFIX", "NativeHdt", "TripleCursor", "build_index"]
