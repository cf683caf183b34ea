"""Every expression is bounded: REGEX and REPLACE run in time linear in their
input (no catastrophic backtracking), and every string an expression builds is
refused past MAX_LITERAL_CHARS with ExpressionLimit (a 422), not left unbound."""

from __future__ import annotations

import time

import pytest

from quanta.sparql.errors import ErrorKind
from quanta.sparql.expr_values import (
    MAX_INTEGER_BITS,
    MAX_LITERAL_CHARS,
    ExprError,
    ExpressionLimit,
    Lit,
    arithmetic,
    integer,
    make_literal,
    string,
)
from quanta.sparql.functions import concat, encode_for_uri, lcase, ucase
from quanta.sparql.functions_regex import compile_regex, regex, replace

# Patterns that backtrack exponentially (or polynomially, to a high degree) in
# a backtracking engine, against inputs that almost match.
CATASTROPHIC = [
    ("^(a+)+$", "a"),
    ("(a|aa)+$", "a"),
    ("^(a|a?)+$", "a"),
    ("(.*a){20}$", "a"),
    ("^(\\w+\\s?)*$", "a"),
    ("(x+x+)+y", "x"),
]


def _lit(text: str, lang: str | None = None) -> Lit:
    return make_literal(text, lang, None)


def _regex(text: str, pattern: str, flags: str | None = None) -> bool:
    result = regex(_lit(text), _lit(pattern), None if flags is None else _lit(flags))
    return result.val is True


# The short inputs first: 28 characters already took seconds with Python's re.
@pytest.mark.parametrize("length", [28, 100_000])
@pytest.mark.parametrize(("pattern", "char"), CATASTROPHIC)
def test_catastrophic_patterns_take_milliseconds(pattern: str, char: str, length: int) -> None:
    text = char * length + "!"
    started = time.perf_counter()
    assert not _regex(text, pattern)
    assert time.perf_counter() - started < 1.0, pattern  # microseconds on an idle machine


def test_replace_is_linear_too() -> None:
    text = "a" * 100_000 + "!"
    started = time.perf_counter()
    result = replace(_lit(text), _lit("^(a+)+$"), _lit("x"))
    assert result.lex == text
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("text", "pattern", "flags", "expected"),
    [
        ("a\nb", "a.b", None, False),  # `.` is not a line end
        ("a\rb", "a.b", None, False),  # \r neither (XPath, unlike Python and Rust)
        ("a\nb", "a.b", "s", True),
        ("a\nb", "^b$", None, False),
        ("a\nb", "^b$", "m", True),
        ("ab\n", "b$", None, False),  # `$` is the very end, not before a final \n
        ("HeLLo", "l+", "i", True),
        ("HeLLo", "l+", None, False),
        ("hello", "h e l", "x", True),  # x drops whitespace outside classes
        ("h l", "h[ ]l", "x", True),  # ... but not inside one
        ("a.c", "a.c", "q", True),  # q: the pattern is a string
        ("abc", "a.c", "q", False),
        ("A.C", "a.c", "iq", True),
        ("a+b", "a\\wb", None, True),  # XPath's \w: every character but P, Z and C
        ("a b", "a\\wb", None, False),
        ("a\u00a0b", "a\\sb", None, False),  # \s is XML's four spaces
        ("a\tb", "a[\\s]b", None, True),
        ("é", "^\\p{L}$", None, True),
        ("é", "^\\p{Lu}$", None, False),  # general categories the old translation refused
        ("É", "^[\\p{Lu}\\d]$", None, True),
        ("é", "^\\p{IsBasicLatin}$", None, False),
        ("é", "^\\P{IsBasicLatin}$", None, True),
        ("é", "^\\p{IsLatin-1Supplement}$", None, True),
        ("a&b", "a[&]b", None, True),  # & and ~ are plain characters in an XPath class
        ("a~b", "^a[~~]b$", None, True),
        ("2024-01-31", "^\\d{4}-\\d{2}-\\d{2}$", None, True),
    ],
)
def test_regex_semantics(text: str, pattern: str, flags: str | None, expected: bool) -> None:
    assert _regex(text, pattern, flags) is expected


@pytest.mark.parametrize(
    ("text", "pattern", "replacement", "flags", "expected"),
    [
        ("hello", "(h)(e)", "$2$1", None, "ehllo"),
        ("hello", "l+", "[$0]", None, "he[ll]o"),
        ("hello", "(l)", "$2", None, "heo"),  # a group the pattern lacks is ""
        ("hello", "(x)?l", "<$1>", None, "he<><>o"),  # a group that did not take part is ""
        ("abc", "B", "\\$", "i", "a$c"),
        ("a.b.c", ".", "-", "q", "a-b-c"),
        ("line1\nline2", "^l", "L", "m", "Line1\nLine2"),
    ],
)
def test_replace_semantics(text: str, pattern: str, replacement: str, flags: str | None, expected: str) -> None:
    result = replace(_lit(text), _lit(pattern), _lit(replacement), None if flags is None else _lit(flags))
    assert result.lex == expected


def test_replace_keeps_the_language_tag() -> None:
    result = replace(_lit("hello", "en"), _lit("l"), _lit("L"))
    assert (result.lex, result.lang) == ("heLLo", "en")


@pytest.mark.parametrize("pattern", ["(a)\\2", "(a\\1)", "[(a)\\1]"])
def test_back_references_to_no_closed_group_are_an_evaluation_error(pattern: str) -> None:
    """Back-references run (test_functions_regex.py), but XPath's rules hold: the
    group exists and is closed before the reference, which is not in a class."""
    assert compile_regex(pattern, "") is None
    with pytest.raises(ExprError, match="invalid regular expression"):
        regex(_lit("aa"), _lit(pattern))
    with pytest.raises(ExprError):
        replace(_lit("aa"), _lit(pattern), _lit("x"))


@pytest.mark.parametrize("pattern", ["a{", "a[b", "a\\", "(?<n>a)", "\\i", "[a-z-[aeiou]]"])
def test_invalid_patterns_are_an_evaluation_error(pattern: str) -> None:
    assert compile_regex(pattern, "") is None


def test_a_pattern_too_large_to_compile_is_refused() -> None:
    with pytest.raises(ExpressionLimit, match="regular expression too large") as caught:
        compile_regex("\\w{5000}", "")
    assert caught.value.kind is ErrorKind.EXPRESSION_LIMIT
    assert ErrorKind.EXPRESSION_LIMIT.status == 422


HALF = _lit("a" * (MAX_LITERAL_CHARS // 2 + 1))


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("CONCAT", lambda: concat(HALF, HALF)),
        ("REPLACE", lambda: replace(HALF, _lit("a"), _lit("aa"))),
        ("REPLACE", lambda: replace(_lit("a" * 1000), _lit("(a+)"), _lit("$1" * 2000))),
        ("ENCODE_FOR_URI", lambda: encode_for_uri(_lit("é" * (MAX_LITERAL_CHARS // 6 + 1)))),
        ("UCASE", lambda: ucase(_lit("ß" * (MAX_LITERAL_CHARS // 2 + 1)))),
    ],
)
def test_string_builders_stop_at_the_limit(name: str, build: object) -> None:
    assert callable(build)
    with pytest.raises(ExpressionLimit, match=f"{name} builds a string of more than {MAX_LITERAL_CHARS}") as caught:
        build()
    assert "QUANTA_MAX_LITERAL_CHARS" in str(caught.value)


def test_strings_up_to_the_limit_are_built() -> None:
    half = _lit("a" * (MAX_LITERAL_CHARS // 2))
    assert len(concat(half, half).lex) == MAX_LITERAL_CHARS
    assert lcase(_lit("A" * MAX_LITERAL_CHARS)).lex == "a" * MAX_LITERAL_CHARS
    assert concat(string("a"), string("b")).lex == "ab"


def test_integers_stop_at_the_limit() -> None:
    big = integer(1 << (MAX_INTEGER_BITS - 1))
    with pytest.raises(ExpressionLimit, match="integer of more than"):
        arithmetic("*", big, big)
    assert arithmetic("+", integer(2), integer(3)).val == 5
