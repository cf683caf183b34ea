"""SPARQL 1.1 query results (JSON, XML, CSV, TSV) written from rows of
dictionary-syntax terms: terms are decoded only here, at the edge.

A writer streams: `head` once, `rows` for each chunk of rows as it comes (a
page), `end` once; an ASK answer is one `boolean` document. `write` is the
whole document at once. Formats are named by FORMATS' keys; content
negotiation (media types to a format) is the HTTP surface's business.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _quote  # json.dumps's string encoder (C)
from typing import Protocol

from quanta.sparql.errors import ErrorKind, QuantaError
from quanta.sparql.terms import nt_term, split_literal
from quanta.sparql.xml_text import escape, quoteattr

FORMATS = {
    "json": "application/sparql-results+json",
    "xml": "application/sparql-results+xml",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
}

RowLike = Sequence[str | None]  # a row (`term_rows.Row`) or any sequence of its terms


class ResultsWriter(Protocol):
    media_type: str

    def head(self, variables: Sequence[str]) -> str:
        """The document up to the first solution."""
        ...

    def rows(self, rows: Iterable[RowLike]) -> str:
        """The next solutions (one term per variable of `head`, in order)."""
        ...

    def end(self) -> str:
        """The rest of the document."""
        ...

    def boolean(self, value: bool) -> str:
        """The whole document of an ASK answer."""
        ...


def writer(fmt: str) -> ResultsWriter:
    """A new writer (writers keep state: use one per document)."""
    kinds: dict[str, type[ResultsWriter]] = {"json": Json, "xml": Xml, "csv": Csv, "tsv": Tsv}
    if fmt not in kinds:
        raise ValueError(f"unknown result format {fmt!r}; choose from {', '.join(FORMATS)}")
    return kinds[fmt]()


def write(fmt: str, head: Sequence[str], rows: Iterable[RowLike], boolean: bool | None = None) -> str:
    """The whole result document; `boolean` is set for ASK."""
    out = writer(fmt)
    if boolean is not None:
        return out.boolean(boolean)
    return out.head(head) + out.rows(rows) + out.end()


def rows_text(fmt: str, head: Sequence[str], rows: Iterable[RowLike]) -> str:
    """Rows as `fmt`'s writer writes them after its head (JSON: the whole
    "bindings" array, brackets included): what a worker renders from ids
    (lib/native/src/render.rs writes the same bytes)."""
    if fmt == "json":
        return json_bindings_text(head, rows)
    out = writer(fmt)
    out.head(head)
    return out.rows(rows)


# -- JSON --


def json_term(term: str) -> dict[str, str]:
    """A term in the SPARQL 1.1 JSON results format."""
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        out = {"type": "literal", "value": lexical}
        if lang:
            out["xml:lang"] = lang
        elif datatype:
            out["datatype"] = datatype
        return out
    if term.startswith("_:"):
        return {"type": "bnode", "value": term[2:]}
    return {"type": "uri", "value": term}


CACHED_CHARS = 4096
"""The writers cache each term's text (pages repeat terms), but not that of a longer term
(a computed literal may have a million characters): 65,536 of those, key and text, held for
good, could be gigabytes (a CSV answer of 512 Ki-character literals kept 260 MB of them)."""


def _json_term_write(term: str) -> str:
    """`json_term` as compact JSON text (what json.dumps writes, a few times faster)."""
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        text = '{"type":"literal","value":' + _quote(lexical)
        if lang:
            text += ',"xml:lang":' + _quote(lang)
        elif datatype:
            text += ',"datatype":' + _quote(datatype)
        return text + "}"
    if term.startswith("_:"):
        return '{"type":"bnode","value":' + _quote(term[2:]) + "}"
    return '{"type":"uri","value":' + _quote(term) + "}"


_json_term_text = lru_cache(maxsize=65536)(_json_term_write)


def _json_rows(keys: Sequence[str], rows: Iterable[RowLike]) -> str:
    encode, write, most = _json_term_text, _json_term_write, CACHED_CHARS
    objects = [
        ",".join(
            [k + (encode(t) if len(t) <= most else write(t)) for k, t in zip(keys, row, strict=False) if t is not None]
        )
        for row in rows
    ]
    return ",".join(["{" + members + "}" for members in objects])


def json_bindings_text(head: Sequence[str], rows: Iterable[RowLike]) -> str:
    """The JSON "bindings" array as text, built from each term's encoded
    form (cached: pages repeat terms), about ten times faster than encoding
    dictionaries."""
    return "[" + _json_rows([json.dumps(var) + ":" for var in head], rows) + "]"


class Json:
    media_type = FORMATS["json"]

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._first = True

    def head(self, variables: Sequence[str]) -> str:
        self._keys = [json.dumps(var) + ":" for var in variables]
        return f'{{"head":{{"vars":{json.dumps(list(variables))}}},"results":{{"bindings":['

    def rows(self, rows: Iterable[RowLike]) -> str:
        text = _json_rows(self._keys, rows)
        if not text:
            return ""
        if self._first:
            self._first = False
            return text
        return "," + text

    def end(self) -> str:
        return "]}}"

    def boolean(self, value: bool) -> str:
        return json.dumps({"head": {}, "boolean": value})


# -- XML --


_XML_CR = {"\r": "&#13;"}  # a raw CR would be read back as a line feed
# What XML 1.0 cannot carry at all, not even as a character reference (its production Char).
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class Unrepresentable(QuantaError):
    """A result holds a character the response's format cannot carry (XML 1.0: the
    control characters but tab, line feed and carriage return; U+FFFE, U+FFFF; lone
    surrogates). Refused rather than written raw (no XML parser would read the
    document) or replaced (a silently wrong answer). lib/native/src/render.rs
    refuses the same characters with the same message."""

    kind = ErrorKind.NOT_ACCEPTABLE


def unrepresentable_message(char: str) -> str:
    return (
        f"the XML results format cannot carry the character U+{ord(char):04X} that a result holds; "
        "ask for application/sparql-results+json, text/tab-separated-values or text/csv"
    )


def _xml_safe(text: str) -> str:
    found = _XML_FORBIDDEN.search(text)
    if found is not None:
        raise Unrepresentable(unrepresentable_message(found.group()))
    return text


def _xml_term(term: str) -> str:
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        attr = (
            f" xml:lang={quoteattr(_xml_safe(lang))}"
            if lang
            else f" datatype={quoteattr(_xml_safe(datatype))}"
            if datatype
            else ""
        )
        return f"<literal{attr}>{escape(_xml_safe(lexical), _XML_CR)}</literal>"
    if term.startswith("_:"):
        return f"<bnode>{escape(_xml_safe(term[2:]))}</bnode>"
    return f"<uri>{escape(_xml_safe(term))}</uri>"


class Xml:
    media_type = FORMATS["xml"]
    _START = '<?xml version="1.0"?>\n<sparql xmlns="http://www.w3.org/2005/sparql-results#">\n<head>\n'

    def __init__(self) -> None:
        self._names: list[str] = []

    def _head(self, variables: Sequence[str]) -> str:
        return self._START + "".join(f"<variable name={quoteattr(v)}/>\n" for v in variables) + "</head>\n"

    def head(self, variables: Sequence[str]) -> str:
        self._names = [quoteattr(v) for v in variables]
        return self._head(variables) + "<results>\n"

    def rows(self, rows: Iterable[RowLike]) -> str:
        out = []
        for row in rows:
            out.append("<result>\n")
            for name, term in zip(self._names, row, strict=True):
                if term is not None:
                    out.append(f"<binding name={name}>{_xml_term(term)}</binding>\n")
            out.append("</result>\n")
        return "".join(out)

    def end(self) -> str:
        return "</results>\n</sparql>\n"

    def boolean(self, value: bool) -> str:
        return self._head(()) + f"<boolean>{'true' if value else 'false'}</boolean>\n</sparql>\n"


# -- CSV and TSV --


def plain_term(term: str) -> str:
    """CSV cells: lexical forms and IRIs without syntax."""
    return split_literal(term)[0] if term.startswith('"') else term


_CSV_QUOTED = re.compile(r'[,"\r\n]')


def _csv_write(term: str) -> str:
    """A term as a CSV cell, quoted as the csv module quotes (QUOTE_MINIMAL)."""
    text = plain_term(term)
    return '"' + text.replace('"', '""') + '"' if _CSV_QUOTED.search(text) else text


_csv_cell = lru_cache(maxsize=65536)(_csv_write)  # up to CACHED_CHARS


class Csv:
    media_type = FORMATS["csv"]

    def _line(self, cells: Iterable[str]) -> str:
        out = io.StringIO()
        csv.writer(out, lineterminator="\r\n").writerow(cells)
        return out.getvalue()

    def head(self, variables: Sequence[str]) -> str:
        return self._line(variables)

    def rows(self, rows: Iterable[RowLike]) -> str:
        cell, write, most = _csv_cell, _csv_write, CACHED_CHARS
        lines = [",".join(["" if t is None else cell(t) if len(t) <= most else write(t) for t in row]) for row in rows]
        # The csv module writes a lone empty cell as "" (an empty line would be no row at all).
        return "".join(line + "\r\n" if line else '""\r\n' for line in lines)

    def end(self) -> str:
        return ""

    def boolean(self, value: bool) -> str:
        return self._line(["_askResult"]) + self._line(["true" if value else "false"])


_tsv_term = lru_cache(maxsize=65536)(nt_term)  # up to CACHED_CHARS


class Tsv:
    media_type = FORMATS["tsv"]

    def head(self, variables: Sequence[str]) -> str:
        return "\t".join(f"?{v}" for v in variables) + "\n"

    def rows(self, rows: Iterable[RowLike]) -> str:
        term, write, most = _tsv_term, nt_term, CACHED_CHARS
        return "".join(
            "\t".join(["" if t is None else term(t) if len(t) <= most else write(t) for t in row]) + "\n"
            for row in rows
        )

    def end(self) -> str:
        return ""

    def boolean(self, value: bool) -> str:
        return f"?_askResult\n{'true' if value else 'false'}\n"
