"""REGEX and REPLACE on two engines, one translation: patterns without
back-references agree with pyoxigraph; patterns with back-references (which
pyoxigraph refuses) agree with Python's re on small inputs, keep XPath's
rules, and stop at the backtracking budget with ExpressionLimit (a 422)."""

from __future__ import annotations

import re
import time

import pyoxigraph as ox
import pytest

from quanta.native._core import Regex
from quanta.sparql.errors import ErrorKind
from quanta.sparql.expr_values import ExprError, ExpressionLimit, Lit, make_literal
from quanta.sparql.functions_regex import Backtracking, compile_regex, regex, replace

TEXTS = ["", "aa", "abba", "abab", "Hello hello", "the the cat", "x\naa\ny", "AbAB", "é é", "a\rb\rc", "112233", "1100"]


def _lit(text: str) -> Lit:
    return make_literal(text, None, None)


def _regex(text: str, pattern: str, flags: str = "") -> bool:
    return regex(_lit(text), _lit(pattern), _lit(flags)).val is True


def _sparql_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _oxigraph(text: str, pattern: str, flags: str) -> bool | None:
    """REGEX in pyoxigraph: True, False, or None for an error (unbound)."""
    args = ", ".join(_sparql_string(a) for a in (text, pattern, flags))
    query = f"SELECT ?r WHERE {{ BIND(REGEX({args}) AS ?r) }}"
    solutions = ox.Store().query(query)
    assert isinstance(solutions, ox.QuerySolutions)
    (row,) = solutions
    value = row["r"]
    return None if value is None else value.value == "true"


# Without back-references: the linear engine, as before, and as pyoxigraph.
LINEAR = [
    ("^a+$", ""),
    ("b+", ""),
    ("^hello", "i"),
    ("^aa$", "m"),
    ("a.b", "s"),  # (without s, XPath's . excludes \r too, which Oxigraph's does not)
    ("a b", "x"),
    ("^(ab)+$", ""),
    ("\\w \\w", ""),
    ("[0-9]{2}", ""),
]


@pytest.mark.parametrize(("pattern", "flags"), LINEAR)
def test_patterns_without_back_references_agree_with_oxigraph(pattern: str, flags: str) -> None:
    assert isinstance(compile_regex(pattern, flags), Regex)
    for text in TEXTS:
        assert _regex(text, pattern, flags) == _oxigraph(text, pattern, flags), (text, pattern, flags)


def test_oxigraph_refuses_back_references() -> None:
    """Why the patterns below are compared to Python's re: Oxigraph's engine is linear."""
    assert _oxigraph("aa", "(a)\\1", "") is None


# With back-references: (XPath pattern, flags, the same in Python's re syntax).
BACKREFS = [
    ("^(.)\\1", "", r"^(.)\1"),
    ("(a)\\1", "", r"(a)\1"),
    ("^(ab)\\1$", "", r"^(ab)\1\Z"),
    ("(\\w+) \\1", "", r"([^\W_]+) \1"),  # on these texts XPath's \w is letters and digits
    ("(\\w+) \\1", "i", r"(?i)([^\W_]+) \1"),
    ("^(a)\\1$", "m", r"(?m)^(a)\1$"),
    ("^(a)(b)\\2\\1$", "", r"^(a)(b)\2\1\Z"),
    ("(.)\\1.", "s", r"(?s)(.)\1."),
    ("(1)(1)(2)(2)(3)(3)(4)?(5)?(6)?(7)?\\10", "", r"(1)(1)(2)(2)(3)(3)(4)?(5)?(6)?(7)?(?(10)\10)"),
    ("(1)\\10", "", r"(1)(?:\1)0"),  # one group: \10 is \1 then the digit 0
    ("( a ) \\1", "x", r"(a)\1"),
]


@pytest.mark.parametrize(("pattern", "flags", "python"), BACKREFS)
def test_back_references_agree_with_python_re(pattern: str, flags: str, python: str) -> None:
    compiled = compile_regex(pattern, flags)
    assert isinstance(compiled, Backtracking)
    for text in TEXTS:
        expected = re.search(python, text) is not None
        assert _regex(text, pattern, flags) == expected, (text, pattern, flags)


def test_a_group_that_took_no_part_matches_the_empty_string() -> None:
    """XPath (F&O 5.6.1), unlike Python's re and Java's: \\N matches "" when group N matched nothing."""
    assert _regex("b", "^(?:(a)|b)\\1$")
    assert _regex("aa", "^(?:(a)|b)\\1$")
    assert not _regex("a", "^(?:(a)|b)\\1$")
    assert re.search(r"^(?:(a)|b)\1$", "b") is None  # Python's re differs here


@pytest.mark.parametrize(
    ("text", "pattern", "replacement", "expected"),
    [
        ("aabccd", "(.)\\1", "<$1>", "<a>b<c>d"),
        ("the the cat sat sat", "(\\w+) \\1", "$1", "the cat sat"),
        ("abab", "(ab)\\1", "[$0]", "[abab]"),
    ],
)
def test_replace_with_back_references(text: str, pattern: str, replacement: str, expected: str) -> None:
    python = re.sub(pattern.replace("\\w", "[^\\W_]"), replacement.replace("$", "\\").replace("\\0", "\\g<0>"), text)
    assert python == expected
    assert replace(_lit(text), _lit(pattern), _lit(replacement)).lex == expected


# (fancy-regex finds ^(a+)+\1$ false at once: its optimizer sees through that one)
@pytest.mark.parametrize("pattern", ["^(a|aa)+\\1$", "(a|aa)+\\1$", "^(a|a?)+\\1$", "^(\\w+\\s?)*\\1$"])
def test_a_catastrophic_back_reference_stops_at_the_budget(pattern: str) -> None:
    text = _lit("a" * 40 + "!")
    started = time.perf_counter()
    with pytest.raises(ExpressionLimit, match="exceeded its backtracking budget") as caught:
        regex(text, _lit(pattern))
    assert caught.value.kind is ErrorKind.EXPRESSION_LIMIT
    assert "REGEX" in str(caught.value)
    if compile_regex(pattern, "").search(""):  # type: ignore[union-attr]
        with pytest.raises(ExprError, match="matches the empty string"):  # REPLACE refuses these
            replace(text, _lit(pattern), _lit("x"))
    else:
        with pytest.raises(ExpressionLimit, match="REPLACE: the regular expression exceeded its backtracking budget"):
            replace(text, _lit(pattern), _lit("x"))
    assert time.perf_counter() - started < 1.0


def test_back_references_run_on_inputs_of_at_most_1024_bytes() -> None:
    assert _regex("ab" * 511 + "cc", "(c)\\1")  # 1,024 bytes
    with pytest.raises(ExpressionLimit, match="strings of at most 1024 bytes"):
        _regex("ab" * 512 + "cc", "(c)\\1")
    with pytest.raises(ExpressionLimit, match="strings of at most 1024 bytes"):
        replace(_lit("é" * 513), _lit("(é)\\1"), _lit("x"))  # 513 characters, 1,026 bytes
    assert _regex("ab" * 5000 + "cc", "cc")  # the linear engine has no such limit


@pytest.mark.parametrize("pattern", ["(a)\\2", "(a\\1)", "[(a)\\1]", "\\1(a)"])
def test_xpath_rules_for_back_references(pattern: str) -> None:
    """The group exists and closes before the reference, which is outside any class."""
    assert compile_regex(pattern, "") is None
    with pytest.raises(ExprError):
        regex(_lit("aa"), _lit(pattern))


def test_a_back_reference_pattern_too_large_is_refused() -> None:
    with pytest.raises(ExpressionLimit, match="regular expression too large"):
        compile_regex("(a)\\1" * 5000, "")
