"""SPARQL's built-in functions over decoded values (sections 17.4 and 17.5).

Each function takes its evaluated arguments and returns a value, or raises
ExprError for what the spec calls an error; the compiler turns that into the
error value. Functions needing more than their arguments' values (BOUND, IF,
COALESCE, IN, BNODE) are special forms in `expressions`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import lru_cache
from urllib.parse import quote

from quanta.engine.sparql.expr_values import (
    BOOLEAN,
    DATE,
    DATETIME,
    DECIMAL,
    DECIMALS,
    DOUBLE,
    FLOAT,
    INTEGER,
    INTEGER_RE,
    LANG,
    OTHER,
    RDF_LANGSTRING,
    STRING,
    XSD_BOOLEAN,
    XSD_DATETIME,
    XSD_DAYTIMEDURATION,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_INTEGER,
    XSD_STRING,
    DateTime,
    ExprError,
    Iri,
    Lit,
    Value,
    boolean,
    decimal,
    double,
    float32,
    format_datetime,
    format_decimal,
    format_double,
    format_tz,
    integer,
    like,
    make_literal,
    numeric,
    parse_datetime,
    parse_double,
    same_term,
    shortest_digits,
    string,
)
from quanta.plan.v1 import plan_pb2

F = plan_pb2.Function

# -- argument checks --


def _lit(v: Value) -> Lit:
    if type(v) is not Lit:
        raise ExprError("literal expected")
    return v


def _text(v: Value) -> Lit:
    """A string literal: simple, xsd:string, or language-tagged."""
    if type(v) is not Lit or not (v.kind == STRING or v.kind == LANG):
        raise ExprError("string literal expected")
    return v


def _simple(v: Value) -> Lit:
    """A simple literal or xsd:string (no language tag)."""
    if type(v) is not Lit or v.kind != STRING:
        raise ExprError("simple literal expected")
    return v


def _compatible(a: Value, b: Value) -> tuple[Lit, Lit]:
    """Argument compatibility (17.4.3.1.1): the second argument's tag, if
    any, must be the first one's."""
    x, y = _text(a), _text(b)
    if y.kind == LANG and (x.kind != LANG or x.lang.lower() != y.lang.lower()):  # type: ignore[union-attr]
        raise ExprError("incompatible string arguments")
    return x, y


def _number(v: Value) -> Lit:
    if type(v) is not Lit or not INTEGER <= v.kind <= DOUBLE:
        raise ExprError("numeric expected")
    return v


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
    return string(_lit(v).lang or "")


def datatype(v: Value) -> Iri:
    return Iri(_lit(v).dt)


_ABSOLUTE_IRI = re.compile(r'[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20<>"{}|^`\\]*')


def iri(v: Value) -> Iri:
    """IRI(): the query's base IRI is not known at run time, so a relative
    IRI is an error (as it is without a base)."""
    if type(v) is Iri:
        return v
    text = _simple(v).lex
    if not _ABSOLUTE_IRI.fullmatch(text):
        raise ExprError("not an absolute IRI")
    return Iri(text)


def strdt(lexical: Value, dt: Value) -> Lit:
    if type(dt) is not Iri or dt.value == RDF_LANGSTRING:
        raise ExprError("STRDT needs a datatype IRI")
    return make_literal(_simple(lexical).lex, None, dt.value)


_LANGUAGE_TAG = re.compile(r"[a-zA-Z]{1,8}(?:-[a-zA-Z0-9]{1,8})*")


def strlang(lexical: Value, tag: Value) -> Lit:
    text, code = _simple(lexical).lex, _simple(tag).lex
    if not _LANGUAGE_TAG.fullmatch(code):
        raise ExprError("invalid language tag")
    return make_literal(text, code, None)


def lang_matches(tag: Value, language_range: Value) -> Lit:
    """RFC 4647 basic filtering, case-insensitive; "*" matches any tag."""
    t, r = _simple(tag).lex.lower(), _simple(language_range).lex.lower()
    if r == "*":
        return boolean(t != "")
    return boolean(t == r or t.startswith(r + "-"))


# -- strings (17.4.3) --


def strlen(v: Value) -> Lit:
    return integer(len(_text(v).lex))


def substr(source: Value, start: Value, length: Value | None = None) -> Lit:
    """1-based, in characters; XPath fn:substring on xsd:integer positions."""
    s = _text(source)
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
    s = _text(v)
    return like(s.lex.upper(), s)


def lcase(v: Value) -> Lit:
    s = _text(v)
    return like(s.lex.lower(), s)


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
    return string(quote(_text(v).lex, safe=""))


def concat(*args: Value) -> Lit:
    """The common language tag survives if every argument has it; else a simple literal."""
    parts = [_text(a) for a in args]
    text = "".join(p.lex for p in parts)
    tags = {p.lang.lower() if p.lang else None for p in parts}
    if len(tags) == 1 and None not in tags:
        return Lit(text, parts[0].lang, RDF_LANGSTRING, LANG, text)
    return string(text)


# -- regular expressions: XPath syntax on Python's re --

# \p{...} classes Python's re can express (outside a character class).
_CATEGORIES = {
    "L": r"[^\W\d_]",
    "N": r"\d",
    "Nd": r"\d",
    "IsBasicLatin": r"[\x00-\x7F]",
    "IsLatin-1Supplement": r"[\x80-\xFF]",
}
_CATEGORY_NAME = re.compile(r"\{([A-Za-z0-9-]+)\}")


def _translate(pattern: str, dot_all: bool, multiline: bool, extended: bool) -> str:
    """XPath regex syntax to Python's: `.` excludes \\r as well as \\n, `$`
    without the m flag matches only at the very end, \\s is XML's four
    spaces, and the x flag drops whitespace outside character classes."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        i += 1
        if c == "\\":
            if i == n:
                raise ExprError("dangling backslash")
            d = pattern[i]
            i += 1
            if d in "pP":
                m = _CATEGORY_NAME.match(pattern, i)
                if m is None or in_class or m.group(1) not in _CATEGORIES:
                    raise ExprError("unsupported character class")
                i = m.end()
                category = _CATEGORIES[m.group(1)]
                out.append(category if d == "p" else f"(?!{category})(?s:.)")
            elif d == "s":
                out.append(" \\t\\n\\r" if in_class else "[ \\t\\n\\r]")
            elif d == "S":
                out.append("\\S" if in_class else "[^ \\t\\n\\r]")
            elif d in "iIcC":
                raise ExprError("XML name classes are not supported")
            else:
                out.append("\\" + d)
        elif in_class:
            if c == "[":
                if out and out[-1] == "-":
                    raise ExprError("character class subtraction is not supported")
                out.append("\\[")
            else:
                in_class = c != "]"
                out.append(c)
        elif c == "[":
            in_class = True
            out.append("[")
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
        elif extended and c in " \t\n\r":
            continue
        elif c == ".":
            out.append("." if dot_all else "[^\\n\\r]")
        elif c == "$":
            out.append("$" if multiline else "\\Z")
        elif c == "(" and pattern.startswith("?", i):
            if not pattern.startswith("?:", i):
                raise ExprError("unsupported group syntax")
            out.append("(?:")
            i += 2
        else:
            out.append(c)
    if in_class:
        raise ExprError("unterminated character class")
    return "".join(out)


@lru_cache(maxsize=512)
def compile_regex(pattern: str, flags: str) -> re.Pattern[str] | None:
    """The compiled pattern, or None if the pattern or flags are invalid."""
    options = 0
    dot_all = multiline = extended = literal = False
    for flag in flags:
        if flag == "i":
            options |= re.IGNORECASE
        elif flag == "s":
            dot_all = True
            options |= re.DOTALL
        elif flag == "m":
            multiline = True
            options |= re.MULTILINE
        elif flag == "x":
            extended = True
        elif flag == "q":
            literal = True
        else:
            return None
    try:
        if literal:
            return re.compile(re.escape(pattern), options & re.IGNORECASE)
        return re.compile(_translate(pattern, dot_all, multiline, extended), options)
    except (re.error, ExprError, OverflowError):
        return None


def regex_of(pattern: Value, flags: Value | None) -> re.Pattern[str]:
    compiled = compile_regex(_simple(pattern).lex, "" if flags is None else _simple(flags).lex)
    if compiled is None:
        raise ExprError("invalid regular expression")
    return compiled


def regex(text: Value, pattern: Value, flags: Value | None = None) -> Lit:
    return boolean(regex_of(pattern, flags).search(_text(text).lex) is not None)


def parse_replacement(text: str, groups: int) -> list[str | int]:
    """XPath replacement strings: $N is a group (as many digits as name an
    existing group), \\$ and \\\\ are escapes; any other $ or \\ is an error."""
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 == n or text[i + 1] not in "\\$":
                raise ExprError("invalid replacement string")
            literal.append(text[i + 1])
            i += 2
        elif c == "$":
            if i + 1 == n or not "0" <= text[i + 1] <= "9":
                raise ExprError("invalid replacement string")
            number, i = int(text[i + 1]), i + 2
            while i < n and "0" <= text[i] <= "9" and number * 10 + int(text[i]) <= groups:
                number, i = number * 10 + int(text[i]), i + 1
            parts.append("".join(literal))
            literal = []
            if number <= groups:
                parts.append(number)
        else:
            literal.append(c)
            i += 1
    parts.append("".join(literal))
    return [p for p in parts if p != ""]


def replace_with(compiled: re.Pattern[str], replacement: str) -> Callable[[Value], Lit]:
    """REPLACE for a known pattern and replacement, keeping the input's tag."""
    if compiled.search("") is not None:
        raise ExprError("the pattern matches the empty string")
    parts = parse_replacement(replacement, compiled.groups)

    def expand(m: re.Match[str]) -> str:
        return "".join(p if type(p) is str else (m.group(p) or "") for p in parts)  # type: ignore[misc]

    def run(text: Value) -> Lit:
        source = _text(text)
        return like(compiled.sub(expand, source.lex), source)

    return run


def replace(text: Value, pattern: Value, replacement: Value, flags: Value | None = None) -> Lit:
    return replace_with(regex_of(pattern, flags), _simple(replacement).lex)(text)


# -- numerics (17.4.4) --


def abs_fn(v: Value) -> Lit:
    n = _number(v)
    return numeric(n.kind, abs(n.val))  # type: ignore[arg-type]


def round_fn(v: Value) -> Lit:
    """Halves round up (towards positive infinity): round(-2.5) is -2."""
    n = _number(v)
    x = n.val
    if n.kind == INTEGER:
        return integer(x)  # type: ignore[arg-type]
    if n.kind == DECIMAL:
        return decimal(DECIMALS.add(x, Decimal("0.5")).to_integral_value(ROUND_FLOOR))  # type: ignore[arg-type]
    # floor and ceil keep x's sign, so -0.4 rounds to -0 as XPath wants
    return numeric(n.kind, math.copysign(math.floor(x + 0.5), x) if math.isfinite(x) else x)  # type: ignore[arg-type, operator]


def ceil_fn(v: Value) -> Lit:
    n = _number(v)
    x = n.val
    if n.kind == INTEGER:
        return integer(x)  # type: ignore[arg-type]
    if n.kind == DECIMAL:
        return decimal(x.to_integral_value(ROUND_CEILING))  # type: ignore[union-attr]
    return numeric(n.kind, math.copysign(math.ceil(x), x) if math.isfinite(x) else x)  # type: ignore[arg-type]


def floor_fn(v: Value) -> Lit:
    n = _number(v)
    x = n.val
    if n.kind == INTEGER:
        return integer(x)  # type: ignore[arg-type]
    if n.kind == DECIMAL:
        return decimal(x.to_integral_value(ROUND_FLOOR))  # type: ignore[union-attr]
    return numeric(n.kind, math.copysign(math.floor(x), x) if math.isfinite(x) else x)  # type: ignore[arg-type]


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
        return string(hashlib.new(name, _simple(v).lex.encode()).hexdigest())

    run.__name__ = name
    return run


# -- XSD casts (17.5) --


def cast_string(v: Value) -> Lit:
    """Typed values are written in their canonical form (XPath casting), so
    xsd:string("01"^^xsd:integer) is "1" while STR() gives "01"."""
    if type(v) is Iri:
        return string(v.value)
    n = _lit(v)
    kind = n.kind
    if kind == STRING:
        return n
    if kind == INTEGER:
        return string(str(n.val))
    if kind == DECIMAL:
        return string(format_decimal(n.val))  # type: ignore[arg-type]
    if kind in (DOUBLE, FLOAT):
        return string(format_double(n.val, single=kind == FLOAT))  # type: ignore[arg-type]
    if kind == BOOLEAN:
        return string("true" if n.val else "false")
    if kind in (DATETIME, DATE):
        return string(format_datetime(n.val, with_time=kind == DATETIME))  # type: ignore[arg-type]
    return string(n.lex)


def _finite(n: Lit) -> float:
    if not math.isfinite(n.val):  # type: ignore[arg-type]
        raise ExprError("NaN or infinity has no exact value")
    return n.val  # type: ignore[return-value]


def cast_integer(v: Value) -> Lit:
    n = _lit(v)
    if n.kind == STRING:
        if INTEGER_RE.fullmatch(n.lex) is None:
            raise ExprError("not an integer")
        return integer(int(n.lex))
    if n.kind == BOOLEAN:
        return integer(int(n.val))  # type: ignore[call-overload]
    if n.kind == INTEGER or n.kind == DECIMAL:
        return integer(int(n.val))  # type: ignore[call-overload]
    if n.kind == FLOAT or n.kind == DOUBLE:
        return integer(int(_finite(n)))
    raise ExprError("cannot cast to xsd:integer")


_DECIMAL_LEXICAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def cast_decimal(v: Value) -> Lit:
    n = _lit(v)
    if n.kind == STRING:
        if _DECIMAL_LEXICAL.fullmatch(n.lex) is None:
            raise ExprError("not a decimal")
        return decimal(Decimal(n.lex))
    if n.kind == BOOLEAN or n.kind == INTEGER:
        return decimal(Decimal(int(n.val)))  # type: ignore[call-overload]
    if n.kind == DECIMAL:
        return decimal(n.val)  # type: ignore[arg-type]
    if n.kind == FLOAT or n.kind == DOUBLE:
        return decimal(Decimal(shortest_digits(_finite(n), single=n.kind == FLOAT)))
    raise ExprError("cannot cast to xsd:decimal")


def _to_float(v: Value) -> float:
    n = _lit(v)
    if n.kind == STRING:
        f = parse_double(n.lex)
        if f is None:
            raise ExprError("not a double")
        return f
    if n.kind == BOOLEAN:
        return 1.0 if n.val else 0.0
    if INTEGER <= n.kind <= DOUBLE:
        return float(n.val)  # type: ignore[arg-type]
    raise ExprError("cannot cast to a floating-point type")


def cast_double(v: Value) -> Lit:
    return double(_to_float(v))


def cast_float(v: Value) -> Lit:
    return float32(_to_float(v))


def cast_boolean(v: Value) -> Lit:
    n = _lit(v)
    if n.kind == STRING:
        if n.lex in ("true", "1"):
            return boolean(True)
        if n.lex in ("false", "0"):
            return boolean(False)
        raise ExprError("not a boolean")
    if n.kind == BOOLEAN:
        return boolean(n.val)  # type: ignore[arg-type]
    if INTEGER <= n.kind <= DOUBLE:
        return boolean(not (n.val == 0 or n.val != n.val))
    raise ExprError("cannot cast to xsd:boolean")


def cast_datetime(v: Value) -> Lit:
    n = _lit(v)
    if n.kind == STRING:
        value = parse_datetime(n.lex)
        if value is None:
            raise ExprError("not a dateTime")
    elif n.kind == DATETIME:
        value = n.val  # type: ignore[assignment]
    elif n.kind == DATE:
        d: DateTime = n.val  # type: ignore[assignment]
        value = DateTime(d.year, d.month, d.day, 0, 0, Decimal(0), d.tz)
    else:
        raise ExprError("cannot cast to xsd:dateTime")
    return Lit(format_datetime(value), None, XSD_DATETIME, DATETIME, value)


CASTS: dict[str, Callable[[Value], Lit]] = {
    XSD_STRING: cast_string,
    XSD_BOOLEAN: cast_boolean,
    XSD_INTEGER: cast_integer,
    XSD_DECIMAL: cast_decimal,
    XSD_FLOAT: cast_float,
    XSD_DOUBLE: cast_double,
    XSD_DATETIME: cast_datetime,
}

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
