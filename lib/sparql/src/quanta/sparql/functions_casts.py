"""XSD constructor functions, xsd:integer(?x) and the like (17.5).

A cast reads the value, not the lexical form, and writes the target type's
canonical form: xsd:string("01"^^xsd:integer) is "1", while STR() gives "01".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from quanta.sparql.expr_dates import DateTime, format_datetime, parse_datetime
from quanta.sparql.expr_values import (
    BOOLEAN,
    DATE,
    DATETIME,
    DECIMAL,
    DECIMAL_RE,
    DOUBLE,
    FLOAT,
    INTEGER,
    INTEGER_RE,
    STRING,
    XSD_BOOLEAN,
    XSD_DATETIME,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_INTEGER,
    XSD_STRING,
    ExprError,
    Iri,
    Lit,
    Value,
    boolean,
    decimal,
    double,
    float32,
    format_decimal,
    format_double,
    integer,
    literal_arg,
    parse_double,
    shortest_digits,
    string,
)


def cast_string(v: Value) -> Lit:
    """Typed values are written in their canonical form (XPath casting), so
    xsd:string("01"^^xsd:integer) is "1" while STR() gives "01"."""
    if type(v) is Iri:
        return string(v.value)
    n = literal_arg(v)
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
    n = literal_arg(v)
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


def cast_decimal(v: Value) -> Lit:
    n = literal_arg(v)
    if n.kind == STRING:
        if DECIMAL_RE.fullmatch(n.lex) is None:
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
    n = literal_arg(v)
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
    n = literal_arg(v)
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
    n = literal_arg(v)
    value: DateTime | None
    if n.kind == STRING:
        value = parse_datetime(n.lex)
    elif n.kind == DATETIME and isinstance(n.val, DateTime):
        value = n.val
    elif n.kind == DATE and isinstance(n.val, DateTime):
        d = n.val
        value = DateTime(d.year, d.month, d.day, 0, 0, Decimal(0), d.tz)
    else:
        raise ExprError("cannot cast to xsd:dateTime")
    if value is None:
        raise ExprError("not a dateTime")
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
