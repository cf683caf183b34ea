"""SPARQL's built-in functions over decoded values (sections 17.4 and 17.5).

Each function takes its evaluated arguments and returns a value, or raises
ExprError for what the spec calls an error; the compiler turns that into the
error value. Functions needing more than their arguments' values (BOUND, IF,
COALESCE, IN, BNODE) are special forms in `expr_compile`; REGEX and REPLACE
live in `functions_regex`, the casts in `functions_casts`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from urllib.parse import quote, urljoin

from quanta.plan.v1 import plan_pb2
from quanta.sparql.expr_dates import DateTime, format_tz
from quanta.sparql.expr_values import (
    DATE,
    DATETIME,
    DECIMAL,
    DECIMALS,
    DOUBLE,
    INTEGER,
    LANG,
    MAX_LITERAL_CHARS,
    OTHER,
    RDF_LANGSTRING,
    STRING,
    XSD_DAYTIMEDURATION,
    ExprError,
    Iri,
    Lit,
    Value,
    boolean,
    bounded,
    decimal,
    integer,
    like,
    literal_arg,
    make_literal,
    numeric,
    numeric_arg,
    same_term,
    simple_arg,
    string,
    text_arg,
    too_long,
)
from quanta.sparql.functions_regex import regex, replace

F = plan_pb2.Function

# -- argument checks beyond expr_values' --


def _compatible(a: Value, b: Value) -> tuple[Lit, Lit]:
    """Argument compatibility (17.4.3.1.1): the second argument's tag, if
    any, must be the first one's."""
    x, y = text_arg(a), text_arg(b)
    if y.kind == LANG and (x.kind != LANG or x.lang.lower() != y.lang.lower()):  # type: ignore[union-attr]
        raise ExprError("incompatible string arguments")
    return x, y


def _datetime(v: Value, dates: bool = False) -> DateTime:
    if type(v) is not Lit or not (v.kind == DATETIME or (dates and v.kind == DATE)):
        raise ExprError("xsd:dateTime expected")
    return v.val  # type: ignore[return-value]


# -- term tests and accessors (17.4.1, 17.4.2) --


def is_iri(v: Value) -> Lit:
    return boolean(type(v) is Iri)


def is_blank(v: Value) -> Lit:
    return boolean(type(v) not in (Iri, Lit))


def is_literal(v: Value) -> Lit:
    return boolean(type(v) is Lit)


def is_numeric(v: Value) -> Lit:
    return boolean(type(v) is Lit and INTEGER <= v.kind <= DOUBLE)


def same_term_fn(a: Value, b: Value) -> Lit:
    return boolean(same_term(a, b))


def str_fn(v: Value) -> Lit:
    if type(v) is Lit:
        return v if v.kind == STRING else string(v.lex)
    if type(v) is Iri:
        return string(v.value)
    raise ExprError("STR of a blank node")


def lang(v: Value) -> Lit:
    return string(literal_arg(v).lang or "")


def datatype(v: Value) -> Iri:
    return Iri(literal_arg(v).dt)


_ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\]')


def iri(v: Value, base: str = "") -> Iri:
    """IRI(): a relative IRI is resolved against the query's base IRI, and
    is an error without one."""
    if type(v) is Iri:
        return v
    text = simple_arg(v).lex
    if _NOT_IN_IRI.search(text):
        raise ExprError("not an IRI")
    if not _ABSOLUTE_IRI.match(text):
        if not base:
            raise ExprError("a relative IRI and no base IRI")
        text = urljoin(base, text)
    return Iri(text)


def strdt(lexical: Value, dt: Value) -> Lit:
    if type(dt) is not Iri or dt.value == RDF_LANGSTRING:
        raise ExprError("STRDT needs a datatype IRI")
    return make_literal(simple_arg(lexical).lex, None, dt.value)


_LANGUAGE_TAG = re.compile(r"[a-zA-Z]{1,8}(?:-[a-zA-Z0-9]{1,8})*")


def strlang(lexical: Value, tag: Value) -> Lit:
    text, code = simple_arg(lexical).lex, simple_arg(tag).lex
    if not _LANGUAGE_TAG.fullmatch(code):
        raise ExprError("invalid language tag")
    return make_literal(text, code, None)


def lang_matches(tag: Value, language_range: Value) -> Lit:
    """RFC 4647 basic filtering, case-insensitive; "*" matches any tag."""
    t, r = simple_arg(tag).lex.lower(), simple_arg(language_range).lex.lower()
    if r == "*":
        return boolean(t != "")
    return boolean(t == r or t.startswith(r + "-"))


# -- strings (17.4.3) --


def strlen(v: Value) -> Lit:
    return integer(len(text_arg(v).lex))


def substr(source: Value, start: Value, length: Value | None = None) -> Lit:
    """1-based, in characters; XPath fn:substring on xsd:integer positions."""
    s = text_arg(source)
    first = _integer_argument(start)
    begin = max(first - 1, 0)
    if length is None:
        return like(s.lex[begin:], s)
    end = first - 1 + _integer_argument(length)
    return like(s.lex[begin:end] if end > begin else "", s)


def _integer_argument(v: Value) -> int:
    if type(v) is not Lit or v.kind != INTEGER:
        raise ExprError("xsd:integer expected")
    return v.val  # type: ignore[return-value]


def ucase(v: Value) -> Lit:
    s = text_arg(v)
    return like(bounded(s.lex.upper(), "UCASE"), s)  # "ß" is "SS": a string can grow


def lcase(v: Value) -> Lit:
    s = text_arg(v)
    return like(bounded(s.lex.lower(), "LCASE"), s)


def strstarts(a: Value, b: Value) -> Lit:
    x, y = _compatible(a, b)
    return boolean(x.lex.startswith(y.lex))


def strends(a: Value, b: Value) -> Lit:
    x, y = _compatible(a, b)
    return boolean(x.lex.endswith(y.lex))


def contains(a: Value, b: Value) -> Lit:
    x, y = _compatible(a, b)
    return boolean(y.lex in x.lex)


def strbefore(a: Value, b: Value) -> Lit:
    """No match gives "" without a tag; a match keeps the first argument's."""
    x, y = _compatible(a, b)
    i = x.lex.find(y.lex)
    return string("") if i < 0 else like(x.lex[:i], x)


def strafter(a: Value, b: Value) -> Lit:
    x, y = _compatible(a, b)
    i = x.lex.find(y.lex)
    return string("") if i < 0 else like(x.lex[i + len(y.lex) :], x)


def encode_for_uri(v: Value) -> Lit:
    return string(bounded(quote(text_arg(v).lex, safe=""), "ENCODE_FOR_URI"))  # up to 12 times longer


def concat(*args: Value) -> Lit:
    """The common language tag survives if every argument has it; else a simple literal."""
    parts = [text_arg(a) for a in args]
    if sum(len(p.lex) for p in parts) > MAX_LITERAL_CHARS:  # refused before it is built
        raise too_long("CONCAT")
    text = "".join(p.lex for p in parts)
    tags = {p.lang.lower() if p.lang else None for p in parts}
    if len(tags) == 1 and None not in tags:
        return Lit(text, parts[0].lang, RDF_LANGSTRING, LANG, text)
    return string(text)


# -- numerics (17.4.4) --


def abs_fn(v: Value) -> Lit:
    n = numeric_arg(v)
    return numeric(n.kind, abs(n.val))  # type: ignore[arg-type]


def round_fn(v: Value) -> Lit:
    """Halves round up (towards positive infinity): round(-2.5) is -2."""
    n = numeric_arg(v)
    x = n.val
    if n.kind == INTEGER:
        return integer(x)  # type: ignore[arg-type]
    if n.kind == DECIMAL:
        return decimal(DECIMALS.add(x, Decimal("0.5")).to_integral_value(ROUND_FLOOR))  # type: ignore[arg-type]
    # floor and ceil keep x's sign, so -0.4 rounds to -0 as XPath wants
    return numeric(n.kind, math.copysign(math.floor(x + 0.5), x) if math.isfinite(x) else x)  # type: ignore[arg-type, operator]


def ceil_fn(v: Value) -> Lit:
    n = numeric_arg(v)
    x = n.val
    if isinstance(x, Decimal):
        return decimal(x.to_integral_value(ROUND_CEILING))
    if isinstance(x, float):
        return numeric(n.kind, math.copysign(math.ceil(x), x) if math.isfinite(x) else x)
    assert isinstance(x, int)
    return integer(x)


def floor_fn(v: Value) -> Lit:
    n = numeric_arg(v)
    x = n.val
    if isinstance(x, Decimal):
        return decimal(x.to_integral_value(ROUND_FLOOR))
    if isinstance(x, float):
        return numeric(n.kind, math.copysign(math.floor(x), x) if math.isfinite(x) else x)
    assert isinstance(x, int)
    return integer(x)


# -- dates (17.4.5); year, month, day and the timezone also accept xsd:date --


def year(v: Value) -> Lit:
    return integer(_datetime(v, dates=True).year)


def month(v: Value) -> Lit:
    return integer(_datetime(v, dates=True).month)


def day(v: Value) -> Lit:
    return integer(_datetime(v, dates=True).day)


def hours(v: Value) -> Lit:
    return integer(_datetime(v).hour)


def minutes(v: Value) -> Lit:
    return integer(_datetime(v).minute)


def seconds(v: Value) -> Lit:
    return decimal(_datetime(v).second)


def timezone(v: Value) -> Lit:
    tz = _datetime(v, dates=True).tz
    if tz is None:
        raise ExprError("no timezone")
    if tz == 0:
        text = "PT0S"
    else:
        h, m = divmod(abs(tz), 60)
        text = ("-" if tz < 0 else "") + "PT" + (f"{h}H" if h else "") + (f"{m}M" if m else "")
    return Lit(text, None, XSD_DAYTIMEDURATION, OTHER, text)


def tz(v: Value) -> Lit:
    return string(format_tz(_datetime(v, dates=True).tz))


# -- hashes (17.4.6) --


def _hash(name: str) -> Callable[[Value], Lit]:
    def run(v: Value) -> Lit:
        return string(hashlib.new(name, simple_arg(v).lex.encode()).hexdigest())

    run.__name__ = name
    return run


# Strict functions: every argument is evaluated first, and an error in any
# argument is the result. Function -> (implementation, min args, max args).
STRICT: dict[int, tuple[Callable[..., Value], int, int]] = {
    F.FUNCTION_IS_IRI: (is_iri, 1, 1),
    F.FUNCTION_IS_BLANK: (is_blank, 1, 1),
    F.FUNCTION_IS_LITERAL: (is_literal, 1, 1),
    F.FUNCTION_IS_NUMERIC: (is_numeric, 1, 1),
    F.FUNCTION_STR: (str_fn, 1, 1),
    F.FUNCTION_LANG: (lang, 1, 1),
    F.FUNCTION_DATATYPE: (datatype, 1, 1),
    F.FUNCTION_IRI: (iri, 1, 1),
    F.FUNCTION_STRDT: (strdt, 2, 2),
    F.FUNCTION_STRLANG: (strlang, 2, 2),
    F.FUNCTION_SAME_TERM: (same_term_fn, 2, 2),
    F.FUNCTION_LANG_MATCHES: (lang_matches, 2, 2),
    F.FUNCTION_STRLEN: (strlen, 1, 1),
    F.FUNCTION_SUBSTR: (substr, 2, 3),
    F.FUNCTION_UCASE: (ucase, 1, 1),
    F.FUNCTION_LCASE: (lcase, 1, 1),
    F.FUNCTION_STRSTARTS: (strstarts, 2, 2),
    F.FUNCTION_STRENDS: (strends, 2, 2),
    F.FUNCTION_CONTAINS: (contains, 2, 2),
    F.FUNCTION_STRBEFORE: (strbefore, 2, 2),
    F.FUNCTION_STRAFTER: (strafter, 2, 2),
    F.FUNCTION_ENCODE_FOR_URI: (encode_for_uri, 1, 1),
    F.FUNCTION_CONCAT: (concat, 0, 1 << 30),
    F.FUNCTION_REGEX: (regex, 2, 3),
    F.FUNCTION_REPLACE: (replace, 3, 4),
    F.FUNCTION_ABS: (abs_fn, 1, 1),
    F.FUNCTION_ROUND: (round_fn, 1, 1),
    F.FUNCTION_CEIL: (ceil_fn, 1, 1),
    F.FUNCTION_FLOOR: (floor_fn, 1, 1),
    F.FUNCTION_YEAR: (year, 1, 1),
    F.FUNCTION_MONTH: (month, 1, 1),
    F.FUNCTION_DAY: (day, 1, 1),
    F.FUNCTION_HOURS: (hours, 1, 1),
    F.FUNCTION_MINUTES: (minutes, 1, 1),
    F.FUNCTION_SECONDS: (seconds, 1, 1),
    F.FUNCTION_TIMEZONE: (timezone, 1, 1),
    F.FUNCTION_TZ: (tz, 1, 1),
    F.FUNCTION_MD5: (_hash("md5"), 1, 1),
    F.FUNCTION_SHA1: (_hash("sha1"), 1, 1),
    F.FUNCTION_SHA256: (_hash("sha256"), 1, 1),
    F.FUNCTION_SHA384: (_hash("sha384"), 1, 1),
    F.FUNCTION_SHA512: (_hash("sha512"), 1, 1),
}
