"""xsd:dateTime and xsd:date values: parsing, comparison, canonical forms.

Python's datetime covers neither years outside 1..9999 nor XSD's partial order
between values with and without a timezone, so values are kept as fields plus
a position on the time line.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal

_EXACT = Context(prec=100)  # seconds on the time line, with any fraction

_TZ = r"(Z|[+-](?:0[0-9]|1[0-4]):[0-5][0-9])?"
DATETIME_RE = re.compile(
    r"(-?(?:[1-9][0-9]{3,}|0[0-9]{3}))-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-4]):([0-5][0-9]):([0-5][0-9](?:\.[0-9]+)?)" + _TZ
)
DATE_RE = re.compile(r"(-?(?:[1-9][0-9]{3,}|0[0-9]{3}))-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])" + _TZ)


class DateTime:
    """An xsd:dateTime or xsd:date value. `stamp` is seconds on the time line
    (UTC when `tz` is set, local time otherwise); `tz` is in minutes."""

    __slots__ = ("day", "hour", "minute", "month", "second", "stamp", "tz", "year")

    def __init__(
        self, year: int, month: int, day: int, hour: int, minute: int, second: Decimal, tz: int | None
    ) -> None:
        days = days_from_civil(year, month, day)
        if hour == 24:  # 24:00:00 is midnight of the next day
            hour, days = 0, days + 1
            year, month, day = civil_from_days(days)
        self.year, self.month, self.day = year, month, day
        self.hour, self.minute, self.second, self.tz = hour, minute, second, tz
        self.stamp = _EXACT.add(Decimal(days * 86400 + hour * 3600 + minute * 60 - (tz or 0) * 60), second)


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar (year 0 = 1 BCE)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28
    return 30 if m in (4, 6, 9, 11) else 31


_NO_TIMEZONE = 0x7FFF  # not a valid offset: the value is ill-formed


def _tz_minutes(tz: str | None) -> int | None:
    if tz is None:
        return None
    if tz == "Z":
        return 0
    minutes = int(tz[1:3]) * 60 + int(tz[4:6])
    if minutes > 14 * 60:
        return _NO_TIMEZONE
    return -minutes if tz[0] == "-" else minutes


def parse_datetime(lex: str) -> DateTime | None:
    m = DATETIME_RE.fullmatch(lex)
    if m is None:
        return None
    year, month, day, hour, minute = (int(g) for g in m.group(1, 2, 3, 4, 5))
    second = Decimal(m.group(6))
    tz = _tz_minutes(m.group(7))
    if day > _days_in_month(year, month) or (hour == 24 and (minute or second)) or tz == _NO_TIMEZONE:
        return None
    return DateTime(year, month, day, hour, minute, second, tz)


def parse_date(lex: str) -> DateTime | None:
    m = DATE_RE.fullmatch(lex)
    if m is None:
        return None
    year, month, day = (int(g) for g in m.group(1, 2, 3))
    tz = _tz_minutes(m.group(4))
    if day > _days_in_month(year, month) or tz == _NO_TIMEZONE:
        return None
    return DateTime(year, month, day, 0, 0, Decimal(0), tz)


def format_datetime(v: DateTime, with_time: bool = True) -> str:
    year = f"-{-v.year:04d}" if v.year < 0 else f"{v.year:04d}"
    text = f"{year}-{v.month:02d}-{v.day:02d}"
    if with_time:
        seconds = "0" if v.second == 0 else format(v.second.normalize(_EXACT), "f")
        if v.second < 10:
            seconds = "0" + seconds
        text += f"T{v.hour:02d}:{v.minute:02d}:{seconds}"
    return text + format_tz(v.tz)


def format_tz(tz: int | None) -> str:
    if tz is None:
        return ""
    if tz == 0:
        return "Z"
    sign = "-" if tz < 0 else "+"
    return f"{sign}{abs(tz) // 60:02d}:{abs(tz) % 60:02d}"


def compare_datetimes(a: DateTime, b: DateTime) -> int | None:
    """XSD's partial order (3.2.7.4): a value without a timezone may lie
    anywhere within +-14 hours; if that decides nothing, the result is None."""
    x, y = a.stamp, b.stamp
    if (a.tz is None) == (b.tz is None):
        return -1 if x < y else (1 if x > y else 0)
    window = 14 * 3600
    if a.tz is None:
        if x + window < y:
            return -1
        return 1 if x - window > y else None
    if x < y - window:
        return -1
    return 1 if x > y + window else None
