"""RDF term values as FILTER/BIND expressions see them (SPARQL 1.1 section 17).

A literal is decoded once, when its id is first met: its lexical form is kept
as written (results must reproduce it) next to the parsed value of the XSD
datatypes the operators know. A known datatype with an invalid lexical form
("abc"^^xsd:integer) is *ill-typed*: it compares only as an RDF term.

Evaluation never raises for type errors: functions return None, the SPARQL
error value, or raise ExprError, which the caller turns into None.
"""

from __future__ import annotations

import math
import os
import re
import struct
from decimal import ROUND_DOWN, Context, Decimal
from fractions import Fraction
from functools import lru_cache
from typing import cast

from quanta.sparql.errors import ErrorKind, QuantaError
from quanta.sparql.expr_dates import compare_datetimes, parse_date, parse_datetime

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
XSD_BOOLEAN = XSD + "boolean"
XSD_INTEGER = XSD + "integer"
XSD_DECIMAL = XSD + "decimal"
XSD_FLOAT = XSD + "float"
XSD_DOUBLE = XSD + "double"
XSD_DATETIME = XSD + "dateTime"
XSD_DATE = XSD + "date"
XSD_DAYTIMEDURATION = XSD + "dayTimeDuration"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

# Literal kinds. Numerics are ordered by the promotion rule of XPath:
# integer < decimal < float < double, so the wider type is `max(kinds)`.
ILL = -1  # a known datatype with an invalid lexical form
OTHER = 0  # a datatype the operators don't know
STRING = 1  # simple literal or xsd:string (the same in RDF 1.1)
LANG = 2
BOOLEAN = 3
INTEGER = 4
DECIMAL = 5
FLOAT = 6
DOUBLE = 7
DATETIME = 8
DATE = 9

# Derived integer types count as xsd:integer, within their value ranges.
_INTEGER_RANGES: dict[str, tuple[int | None, int | None]] = {
    XSD + name: bounds
    for name, bounds in {
        "integer": (None, None),
        "nonPositiveInteger": (None, 0),
        "negativeInteger": (None, -1),
        "nonNegativeInteger": (0, None),
        "positiveInteger": (1, None),
        "long": (-(2**63), 2**63 - 1),
        "int": (-(2**31), 2**31 - 1),
        "short": (-(2**15), 2**15 - 1),
        "byte": (-128, 127),
        "unsignedLong": (0, 2**64 - 1),
        "unsignedInt": (0, 2**32 - 1),
        "unsignedShort": (0, 2**16 - 1),
        "unsignedByte": (0, 2**8 - 1),
    }.items()
}
NUMERIC_DATATYPES = frozenset([*_INTEGER_RANGES, XSD_DECIMAL, XSD_FLOAT, XSD_DOUBLE])

INTEGER_RE = re.compile(r"[+-]?[0-9]+")
DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?INF|NaN")
# Decimal arithmetic: sums are exact; products and quotients keep 18
# fractional digits, truncated (XPath F&O 6.2 leaves the precision to the
# implementation; Oxigraph's quotients are the same).
DECIMALS = Context(prec=200, Emax=10**6, Emin=-(10**6))
_QUANTUM = Decimal(1).scaleb(-18)


class ExprError(Exception):
    """A SPARQL expression error (type error, invalid argument, ...)."""


# The longest string an expression may build, in characters (QUANTA_MAX_LITERAL_CHARS; one
# setting for workers and gateway alike, read where the expressions are). 1 Mi characters is
# far beyond any real literal yet keeps a value (at most 4 MiB of UTF-8, a few times that while
# rendered) small beside a process's memory: doubling a string 24 times stops at the 20th.
MAX_LITERAL_CHARS = int(os.environ.get("QUANTA_MAX_LITERAL_CHARS", 1 << 20))
# The widest integer an expression may compute, in bits: Python's int-to-text limit is 4300
# digits (about 14,284 bits), and ?x * ?x repeated would otherwise grow exponentially.
MAX_INTEGER_BITS = 14_000


class ExpressionLimit(QuantaError):
    """An expression built a value past a limit: the query fails with a 422 naming the limit,
    never an unbound value (a silently different answer) and never an exhausted process.
    Not an ExprError, so no operator turns it into SPARQL's error value."""

    kind = ErrorKind.EXPRESSION_LIMIT


def bounded(lex: str, what: str) -> str:
    """`lex`, if it is within MAX_LITERAL_CHARS; `what` names the builder in the error."""
    if len(lex) > MAX_LITERAL_CHARS:
        raise too_long(what)
    return lex


def too_long(what: str) -> ExpressionLimit:
    return ExpressionLimit(
        f"{what} builds a string of more than {MAX_LITERAL_CHARS} characters (QUANTA_MAX_LITERAL_CHARS)"
    )


class Iri:
    __slots__ = ("gid", "value")

    def __init__(self, value: str, gid: int = 0) -> None:
        self.value = value
        self.gid = gid  # the term's id when known, so results need no interning


class Blank:
    __slots__ = ("gid", "label")

    def __init__(self, label: str, gid: int = 0) -> None:
        self.label = label
        self.gid = gid


class Lit:
    """`val`: int, Decimal, float, bool, str, or DateTime for the known kinds;
    the lexical form for OTHER and ILL."""

    __slots__ = ("dt", "gid", "kind", "lang", "lex", "val")

    def __init__(self, lex: str, lang: str | None, dt: str, kind: int, val: object, gid: int = 0) -> None:
        self.lex = lex
        self.lang = lang
        self.dt = dt
        self.kind = kind
        self.val = val
        self.gid = gid

    def __repr__(self) -> str:
        return f"Lit({self.lex!r}, {self.lang!r}, {self.dt!r})"


Value = Iri | Blank | Lit
Number = int | Decimal | float


def to_float32(x: float) -> float:
    """Round a double to the nearest xsd:float."""
    try:
        rounded: float = struct.unpack("f", struct.pack("f", x))[0]
        return rounded
    except OverflowError:
        return math.copysign(math.inf, x)


def parse_double(lex: str) -> float | None:
    if DOUBLE_RE.fullmatch(lex) is None:
        return None
    return float(lex.replace("INF", "inf"))


def make_literal(lex: str, lang: str | None, dt: str | None, gid: int = 0) -> Lit:
    """A literal with its value decoded; `dt` None means xsd:string (or
    rdf:langString with a `lang`)."""
    if lang:
        return Lit(lex, lang, RDF_LANGSTRING, LANG, lex, gid)
    if dt is None or dt == XSD_STRING:
        return Lit(lex, None, XSD_STRING, STRING, lex, gid)
    kind, val = _decode(lex, dt)
    return Lit(lex, None, dt, kind, val, gid)


def _decode(lex: str, dt: str) -> tuple[int, object]:
    bounds = _INTEGER_RANGES.get(dt)
    if bounds is not None:
        if INTEGER_RE.fullmatch(lex) is None or len(lex) > 4000:  # int() refuses longer
            return ILL, lex
        i = int(lex)
        low, high = bounds
        if (low is not None and i < low) or (high is not None and i > high):
            return ILL, lex
        return INTEGER, i
    if dt == XSD_DECIMAL:
        return (DECIMAL, Decimal(lex)) if DECIMAL_RE.fullmatch(lex) else (ILL, lex)
    if dt in (XSD_DOUBLE, XSD_FLOAT):
        f = parse_double(lex)
        if f is None:
            return ILL, lex
        return (DOUBLE, f) if dt == XSD_DOUBLE else (FLOAT, to_float32(f))
    if dt == XSD_BOOLEAN:
        if lex in ("true", "1"):
            return BOOLEAN, True
        return (BOOLEAN, False) if lex in ("false", "0") else (ILL, lex)
    if dt in (XSD_DATETIME, XSD_DATE):
        value = parse_datetime(lex) if dt == XSD_DATETIME else parse_date(lex)
        if value is None:
            return ILL, lex
        return (DATETIME if dt == XSD_DATETIME else DATE), value
    if dt == RDF_LANGSTRING:  # a langString without a tag is ill-formed
        return ILL, lex
    return OTHER, lex


# -- constructors for results, in canonical lexical forms --


def string(lex: str) -> Lit:
    return Lit(lex, None, XSD_STRING, STRING, lex)


def like(lex: str, source: Lit) -> Lit:
    """A string with `source`'s language tag (string functions keep it)."""
    if source.kind == LANG:
        return Lit(lex, source.lang, RDF_LANGSTRING, LANG, lex)
    return Lit(lex, None, XSD_STRING, STRING, lex)


TRUE = Lit("true", None, XSD_BOOLEAN, BOOLEAN, True)
FALSE = Lit("false", None, XSD_BOOLEAN, BOOLEAN, False)


def boolean(b: bool) -> Lit:
    return TRUE if b else FALSE


def integer(i: int) -> Lit:
    return Lit(str(_bounded(i)), None, XSD_INTEGER, INTEGER, i)


def _bounded(i: int) -> int:
    if i.bit_length() > MAX_INTEGER_BITS:
        raise ExpressionLimit(f"an integer of more than {MAX_INTEGER_BITS} bits (about 4,200 digits)")
    return i


def decimal(d: Decimal) -> Lit:
    return Lit(format_decimal(d), None, XSD_DECIMAL, DECIMAL, d)


def double(f: float) -> Lit:
    return Lit(format_double(f), None, XSD_DOUBLE, DOUBLE, f)


def float32(f: float) -> Lit:
    f = to_float32(f)
    return Lit(format_double(f, single=True), None, XSD_FLOAT, FLOAT, f)


def numeric(kind: int, value: int | Decimal | float) -> Lit:
    if kind == INTEGER:
        return integer(value)  # type: ignore[arg-type]
    if kind == DECIMAL:
        return decimal(value)  # type: ignore[arg-type]
    return double(value) if kind == DOUBLE else float32(value)  # type: ignore[arg-type]


def format_decimal(d: Decimal) -> str:
    """XSD 1.1 canonical form: no exponent, no trailing zeros, "2" not "2.0"."""
    if d == 0:
        return "0"
    return format(d.normalize(DECIMALS), "f")


def shortest_digits(f: float, single: bool) -> str:
    """The shortest decimal string that reads back as `f` (as a float if `single`)."""
    if not single:
        return repr(f)
    for precision in range(1, 10):
        text = f"{f:.{precision}g}"
        if to_float32(float(text)) == f:
            return text
    return repr(f)


def format_double(f: float, single: bool = False) -> str:
    """XPath's cast to string: plain notation for 1e-6 <= |f| < 1e6, else
    the XSD canonical mantissa-exponent form ("1.0E7")."""
    if f != f:
        return "NaN"
    if math.isinf(f):
        return "INF" if f > 0 else "-INF"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    return _format_finite(f, single)


@lru_cache(maxsize=4096)
def _format_finite(f: float, single: bool) -> str:
    """`format_double` of a finite number but 0 (a value and its form are one-to-one there:
    cached, as aggregates' results repeat: BSBM's averages of a few integer ratings)."""
    d = Decimal(shortest_digits(f, single)).normalize(DECIMALS)
    if 1e-6 <= abs(f) < 1e6:
        return format(d, "f")
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


# -- argument checks for the functions --


def literal_arg(v: Value) -> Lit:
    if type(v) is not Lit:
        raise ExprError("literal expected")
    return v


def text_arg(v: Value) -> Lit:
    """A string literal: simple, xsd:string, or language-tagged."""
    if type(v) is not Lit or not (v.kind == STRING or v.kind == LANG):
        raise ExprError("string literal expected")
    return v


def simple_arg(v: Value) -> Lit:
    """A simple literal or xsd:string (no language tag)."""
    if type(v) is not Lit or v.kind != STRING:
        raise ExprError("simple literal expected")
    return v


def numeric_arg(v: Value) -> Lit:
    if type(v) is not Lit or not INTEGER <= v.kind <= DOUBLE:
        raise ExprError("numeric expected")
    return v


# -- operators --


def ebv(v: Value | None) -> bool | None:
    """Effective boolean value (17.2.2); None is an error."""
    if type(v) is Lit:
        kind = v.kind
        if kind == BOOLEAN:
            return v.val  # type: ignore[return-value]
        if kind in (STRING, LANG):
            return v.lex != ""
        if INTEGER <= kind <= DOUBLE:
            return not (v.val == 0 or v.val != v.val)
        if kind == ILL and (v.dt == XSD_BOOLEAN or v.dt in NUMERIC_DATATYPES):
            return False
    return None


def same_term(a: Value, b: Value) -> bool:
    """RDF term identity; language tags are case-insensitive (RDF 1.1)."""
    if type(a) is Lit:
        if type(b) is not Lit or a.lex != b.lex or a.dt != b.dt:
            return False
        return a.lang is None or a.lang.lower() == b.lang.lower()  # type: ignore[union-attr]
    if type(a) is Iri:
        return type(b) is Iri and a.value == b.value
    return type(b) is Blank and a.label == b.label  # type: ignore[union-attr]


def promote(a: Lit, b: Lit) -> tuple[int, object, object]:
    """Both numeric operands in their common type (XPath type promotion)."""
    return _promote(a.kind, a.val, b.kind, b.val)  # type: ignore[arg-type]


def _promote(ka: int, x: Number, kb: int, y: Number) -> tuple[int, object, object]:
    kind = max(ka, kb)
    if kind >= FLOAT:
        x, y = _float(x), _float(y)
        if kind == FLOAT:
            x, y = to_float32(x), to_float32(y)
    elif kind == DECIMAL:
        x, y = Decimal(x), Decimal(y)
    return kind, x, y


def _float(x: int | Decimal | float) -> float:
    if type(x) is Decimal and not x:
        return 0.0  # xsd:decimal has one zero, unsigned (Python's Decimal keeps a sign on it)
    try:
        return float(x)
    except OverflowError:  # an integer beyond the doubles
        return math.copysign(math.inf, x)


_BY_VALUE = frozenset([STRING, INTEGER, DECIMAL, FLOAT, DOUBLE])


def equal(a: Value, b: Value) -> bool | None:
    """`=` (17.3 operator mapping, falling back to RDFterm-equal).

    Values of known, different types are unequal; a literal of an unknown or
    ill-typed datatype equals only itself and is otherwise an error, except
    against a language-tagged string, which is known to differ (the DAWG
    open-world tests, open-eq-07 to -12, check exactly this)."""
    if type(a) is not Lit or type(b) is not Lit:
        return same_term(a, b)
    ka, kb = a.kind, b.kind
    if ka == kb and ka in _BY_VALUE:
        return a.val == b.val  # the common case: no promotion
    if INTEGER <= ka <= DOUBLE and INTEGER <= kb <= DOUBLE:
        _, x, y = promote(a, b)
        return x == y
    if ka == kb:
        if ka == LANG:
            return a.lex == b.lex and a.lang.lower() == b.lang.lower()  # type: ignore[union-attr]
        if ka == BOOLEAN:
            return a.val == b.val
        if ka in (DATETIME, DATE):
            order = compare_datetimes(a.val, b.val)  # type: ignore[arg-type]
            return None if order is None else order == 0
    if ka <= OTHER or kb <= OTHER:
        if a.lex == b.lex and a.dt == b.dt:
            return True
        return False if LANG in (ka, kb) else None
    return False


UNORDERED = 2  # a NaN operand: every comparison is false


def compare(a: Value, b: Value) -> int | None:
    """Order for < <= > >=: -1, 0, 1, or UNORDERED; None when the operands
    are not comparable (an error)."""
    if type(a) is not Lit or type(b) is not Lit:
        return None
    ka, kb = a.kind, b.kind
    if INTEGER <= ka <= DOUBLE and INTEGER <= kb <= DOUBLE:
        if ka == kb:
            x, y = a.val, b.val
        else:
            _, x, y = promote(a, b)
        if x != x or y != y:
            return UNORDERED
        return -1 if x < y else (1 if x > y else 0)  # type: ignore[operator]
    if ka != kb:
        return None
    if ka in (STRING, BOOLEAN):
        x, y = a.val, b.val
        return -1 if x < y else (1 if x > y else 0)  # type: ignore[operator]
    if ka in (DATETIME, DATE):
        return compare_datetimes(a.val, b.val)  # type: ignore[arg-type]
    return None


def arithmetic(op: str, a: Value, b: Value) -> Lit:
    """+ - * / on numerics (XPath op:numeric-*), result in the promoted type;
    integer division gives a decimal."""
    if type(a) is not Lit or type(b) is not Lit or not (INTEGER <= a.kind <= DOUBLE and INTEGER <= b.kind <= DOUBLE):
        raise ExprError("arithmetic on non-numeric operands")
    return numeric(*compute(op, a.kind, a.val, b.kind, b.val))  # type: ignore[arg-type]


def compute(op: str, ka: int, x: Number, kb: int, y: Number) -> tuple[int, Number]:
    """`arithmetic` on two numbers given by kind and value: the result's kind and value,
    rounded as that kind is (its literal is `numeric(kind, value)`, written only when
    needed: a running SUM adds values, not literals)."""
    kind, x, y = _promote(ka, x, kb, y)  # type: ignore[assignment]
    if kind >= FLOAT:
        if op == "/":
            result: Number = _float_divide(x, y)  # type: ignore[arg-type]
        else:
            result = x + y if op == "+" else x - y if op == "-" else x * y  # type: ignore[operator]
        return kind, to_float32(result) if kind == FLOAT else result  # type: ignore[arg-type]
    if op == "/":
        if y == 0:
            raise ExprError("division by zero")
        return DECIMAL, _truncate(DECIMALS.divide(Decimal(x), Decimal(y)))
    if kind == INTEGER:
        return kind, _bounded(x + y if op == "+" else x - y if op == "-" else x * y)  # type: ignore[operator, arg-type]
    if op == "+":
        return kind, DECIMALS.add(x, y)  # type: ignore[arg-type]
    if op == "-":
        return kind, DECIMALS.subtract(x, y)  # type: ignore[arg-type]
    return kind, _truncate(DECIMALS.multiply(x, y))  # type: ignore[arg-type]


# SUM and AVG add floats and doubles exactly and round once, to the promoted type, when the
# aggregate is read: the result does not depend on the order or grouping of its addends, so a
# sum merged from partial sums (a quantum's each) is the sum of the rows. A worker writes a
# partial sum of floats or doubles with its exact value in decimal notation and one of these
# datatypes (lib/native/src/exec.rs, `Exact`).
EXACT_SUMS = {"urn:quanta:sum:float": FLOAT, "urn:quanta:sum:double": DOUBLE}

Sum = tuple[int, "Number | Fraction"]  # kind, and value: an int or a Fraction while a float or double sum is finite


def add_exactly(total: Sum | None, kind: int, value: Number | Fraction, times: int = 1) -> Sum:
    """`total` plus `times` times `value` (of numeric `kind`): integers and decimals as `compute`
    adds them; from the first float or double on, exactly (a NaN or an infinity as IEEE adds)."""
    if kind < FLOAT and (total is None or total[0] < FLOAT):
        number = cast(Number, value)
        weighed = (kind, number) if times == 1 else compute("*", kind, number, INTEGER, times)
        return weighed if total is None else compute("+", total[0], cast(Number, total[1]), *weighed)
    addend = _exact(value) * times
    if total is None:
        return kind, addend
    old = _exact(total[1])
    if isinstance(old, float) or isinstance(addend, float):  # a NaN or an infinity
        return max(kind, total[0]), float(old) + float(addend)
    return max(kind, total[0]), old + addend


def read_sum(total: Sum, count: int | None = None) -> tuple[int, Number]:
    """A sum (or, divided by `count`, an average) as a value of its kind (an average of integers
    is a decimal): floats and doubles rounded once."""
    kind, value = total
    if kind >= FLOAT and not isinstance(value, float):
        exact = Fraction(value) if count is None else Fraction(value) / count
        return kind, nearest_double(exact) if kind == DOUBLE else nearest_float32(exact)
    return (kind, cast(Number, value)) if count is None else compute("/", kind, cast(Number, value), INTEGER, count)


def read_exact(lexical: str) -> int | Fraction:
    """A worker's partial sum (`EXACT_SUMS`): its decimal notation read exactly."""
    if lexical.endswith(".0"):
        return int(lexical[:-2])
    return Fraction(lexical)


def _exact(value: Number | Fraction) -> int | Fraction | float:
    """A number's exact value: an int when integral (the common case, and fast), else a Fraction;
    a NaN or an infinity as it is."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return value
        return int(value) if value.is_integer() else Fraction(value)
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else value
    return int(value) if value == value.to_integral_value() else Fraction(value)


def nearest_double(exact: Fraction) -> float:
    try:
        return float(exact)  # correctly rounded
    except OverflowError:
        return math.copysign(math.inf, exact)


def nearest_float32(exact: Fraction) -> float:
    """The xsd:float nearest to `exact` (ties to even). Rounding to a double first errs only
    when the double lies halfway between two floats and `exact` does not: decided here."""
    x = nearest_double(exact)
    f = to_float32(x)
    if f == x or math.isinf(f):
        return f
    other = 2 * x - f  # the float on the other side of x, if x is halfway
    if to_float32(other) != other or exact == x:
        return f
    return max(f, other) if exact > x else min(f, other)


def _truncate(d: Decimal) -> Decimal:
    """At most 18 fractional digits for products and quotients."""
    if d.as_tuple().exponent < -18:  # type: ignore[operator]
        return d.quantize(_QUANTUM, rounding=ROUND_DOWN, context=DECIMALS)
    return d


def _float_divide(x: float, y: float) -> float:
    if y == 0:
        if x == 0 or x != x:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def negate(a: Value) -> Lit:
    if type(a) is not Lit or not INTEGER <= a.kind <= DOUBLE:
        raise ExprError("unary minus on a non-numeric operand")
    return numeric(a.kind, -a.val)  # type: ignore[operator]


def plus(a: Value) -> Lit:
    if type(a) is not Lit or not INTEGER <= a.kind <= DOUBLE:
        raise ExprError("unary plus on a non-numeric operand")
    return numeric(a.kind, a.val)  # type: ignore[arg-type]
