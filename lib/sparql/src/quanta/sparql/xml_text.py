"""Escaping text and attribute values for XML, as `xml.sax.saxutils` does it
(`escape`, `quoteattr`, same results), without importing it: it imports
`urllib.request`, `http.client` and `email` (about 50 ms at each process start,
a third of `quanta query`'s imports)."""

from __future__ import annotations

from collections.abc import Mapping


def escape(data: str, entities: Mapping[str, str] | None = None) -> str:
    """`&`, `<` and `>` escaped, then each of `entities` replaced."""
    data = data.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
    for char, entity in (entities or {}).items():
        data = data.replace(char, entity)
    return data


def quoteattr(data: str) -> str:
    """An attribute value, escaped and quoted (with `'` when it holds `"` and no `'`)."""
    data = escape(data, {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})
    if '"' not in data:
        return f'"{data}"'
    if "'" not in data:
        return f"'{data}'"
    return '"' + data.replace('"', "&quot;") + '"'
