"""SPARQL 1.1 query result formats (JSON, XML, CSV, TSV), written from
dictionary-syntax term strings: terms are decoded only here, at the edge."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from xml.sax.saxutils import escape, quoteattr

from quanta.sparql.terms import escape_lexical, split_literal

FORMATS = {
    "json": "application/sparql-results+json",
    "xml": "application/sparql-results+xml",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
}

Row = Sequence[str | None]  # one term string per head variable; None = unbound


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


def json_bindings(head: Sequence[str], rows: Iterable[Row]) -> list[dict[str, dict[str, str]]]:
    return [{var: json_term(t) for var, t in zip(head, row, strict=True) if t is not None} for row in rows]


@lru_cache(maxsize=65536)
def _json_term_text(term: str) -> str:
    return json.dumps(json_term(term), separators=(",", ":"))


def json_bindings_text(head: Sequence[str], rows: Iterable[Row]) -> str:
    """The JSON "bindings" array as text, built from each term's encoded
    form (cached: pages repeat terms), about ten times faster than encoding
    dictionaries."""
    keys = [json.dumps(var) + ":" for var in head]
    encode = _json_term_text
    return (
        "["
        + ",".join(
            "{" + ",".join(k + encode(t) for k, t in zip(keys, row, strict=True) if t is not None) + "}" for row in rows
        )
        + "]"
    )


def nt_term(term: str) -> str:
    """N-Triples syntax (TSV cells)."""
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        quoted = f'"{escape_lexical(lexical)}"'
        return f"{quoted}@{lang}" if lang else f"{quoted}^^<{datatype}>" if datatype else quoted
    return term if term.startswith("_:") else f"<{term}>"


def plain_term(term: str) -> str:
    """CSV cells: lexical forms and IRIs without syntax."""
    return split_literal(term)[0] if term.startswith('"') else term


def write(fmt: str, head: Sequence[str], rows: Iterable[Row], boolean: bool | None = None) -> str:
    """The whole result document; `boolean` is set for ASK."""
    if fmt == "json":
        if boolean is not None:
            return json.dumps({"head": {}, "boolean": boolean})
        bindings = json_bindings_text(head, rows)
        return f'{{"head":{{"vars":{json.dumps(list(head))}}},"results":{{"bindings":{bindings}}}}}'
    if fmt == "xml":
        return _xml(head, rows, boolean)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        if boolean is not None:
            writer.writerow(["_askResult"])
            writer.writerow(["true" if boolean else "false"])
            return out.getvalue()
        writer.writerow(head)
        for row in rows:
            writer.writerow(["" if t is None else plain_term(t) for t in row])
        return out.getvalue()
    if fmt == "tsv":
        if boolean is not None:
            return f"?_askResult\n{'true' if boolean else 'false'}\n"
        lines = ["\t".join(f"?{v}" for v in head)]
        lines += ["\t".join("" if t is None else nt_term(t) for t in row) for row in rows]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown result format {fmt!r}; choose from {', '.join(FORMATS)}")


def _xml(head: Sequence[str], rows: Iterable[Row], boolean: bool | None) -> str:
    out = ['<?xml version="1.0"?>', '<sparql xmlns="http://www.w3.org/2005/sparql-results#">', "<head>"]
    out += [f"<variable name={quoteattr(v)}/>" for v in head]
    out.append("</head>")
    if boolean is not None:
        out.append(f"<boolean>{'true' if boolean else 'false'}</boolean>")
    else:
        out.append("<results>")
        for row in rows:
            out.append("<result>")
            for var, term in zip(head, row, strict=True):
                if term is not None:
                    out.append(f"<binding name={quoteattr(var)}>{_xml_term(term)}</binding>")
            out.append("</result>")
        out.append("</results>")
    out.append("</sparql>")
    return "\n".join(out) + "\n"


def _xml_term(term: str) -> str:
    if term.startswith('"'):
        lexical, lang, datatype = split_literal(term)
        attr = f" xml:lang={quoteattr(lang)}" if lang else f" datatype={quoteattr(datatype)}" if datatype else ""
        return f"<literal{attr}>{escape(lexical)}</literal>"
    if term.startswith("_:"):
        return f"<bnode>{escape(term[2:])}</bnode>"
    return f"<uri>{escape(term)}</uri>"
