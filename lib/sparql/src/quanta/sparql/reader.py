"""Reading SPARQL 1.1 JSON results (a page from the service, any endpoint's
answer) into rows of dictionary-syntax terms, the form every other part of
quanta works on (term tables intern them, the writers write them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quanta.sparql.term_rows import Row
from quanta.sparql.terms import literal


@dataclass(frozen=True, slots=True)
class Results:
    """A SELECT's variables and rows, or an ASK's boolean (then `head` and `rows` are empty)."""

    head: list[str]
    rows: list[Row]
    boolean: bool | None = None


def read_json(document: str | bytes | Mapping[str, Any]) -> Results:
    """A SPARQL JSON results document, as text or already parsed (other members,
    like a quanta page's `next` and `stats`, are ignored)."""
    doc = json.loads(document) if isinstance(document, str | bytes) else document
    if "boolean" in doc:
        return Results([], [], bool(doc["boolean"]))
    head = list(doc.get("head", {}).get("vars", []))
    bindings = doc.get("results", {}).get("bindings", [])
    return Results(head, [row_from_json(head, b) for b in bindings])


def row_from_json(head: list[str], binding: Mapping[str, Mapping[str, str]]) -> Row:
    return tuple(term_from_json(binding[v]) if v in binding else None for v in head)


def term_from_json(term: Mapping[str, str]) -> str:
    """One RDF term of SPARQL JSON results in dictionary syntax."""
    kind, value = term["type"], term["value"]
    if kind == "uri":
        return value
    if kind == "bnode":
        return f"_:{value}"
    if kind in ("literal", "typed-literal"):  # typed-literal: the 2008 draft some endpoints still send
        return literal(value, term.get("xml:lang"), term.get("datatype"))
    raise ValueError(f"unknown RDF term type {kind!r} in SPARQL JSON results")
