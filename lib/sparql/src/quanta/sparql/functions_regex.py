"""REGEX and REPLACE: XPath regular expressions (F&O 7.6), translated once to
the syntax of Rust's `regex` crate and run by the native core
(`quanta.native._core.Regex`) on one of two engines.

A pattern without back-references runs on finite automata, linear in its
input: no pattern backtracks exponentially (`^(a+)+$` on 40 `a`s and a `!`
takes microseconds, where Python's re took hours), and long inputs are
matched without the GIL. A pattern with back-references (\\1), which no
linear engine runs, runs on a backtracking engine (`fancy-regex`) under a
budget (src/regexp.rs): 50,000 backtracks a search, inputs of at most 1,024
bytes, 100 ms for all of one REPLACE's searches; past it the query fails
with ExpressionLimit (a 422 `expression-limit`), never a silently false
FILTER. The translation refuses, as an evaluation error, the XPath features
that are not supported: character class subtraction, \\i and \\c, Unicode
blocks but IsBasicLatin and IsLatin-1Supplement. A pattern that compiles to
more than the engine's size limit is refused with ExpressionLimit too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from quanta.native._core import Regex, RegexBudgetExceeded, RegexTooBig
from quanta.sparql.expr_values import (
    MAX_LITERAL_CHARS,
    ExprError,
    ExpressionLimit,
    Lit,
    Value,
    boolean,
    bounded,
    like,
    simple_arg,
    text_arg,
    too_long,
)

# Unicode general categories (the engine knows them all) and the blocks supported.
_CATEGORIES = frozenset({
    "L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No", "P", "Pc", "Pd", "Ps",
    "Pe", "Pi", "Pf", "Po", "Z", "Zs", "Zl", "Zp", "S", "Sm", "Sc", "Sk", "So", "C", "Cc", "Cf", "Co", "Cn",
})  # fmt: skip
_BLOCKS = {"IsBasicLatin": "\\x00-\\x7F", "IsLatin-1Supplement": "\\x80-\\xFF"}
_CATEGORY_NAME = re.compile(r"\{([A-Za-z0-9-]+)\}")
# What the engine's syntax gives a meaning that XPath's does not: escaped
# outside a class (flag q) and, for & and ~ (set operators), inside one.
_META = frozenset("\\.+*?()|[]{}^$#&-~")
# Escapes whose meaning differs: XML's four spaces, XPath's \w (every character
# but punctuation, separators and "other").
_ESCAPES = {
    "s": "[ \\t\\n\\r]",
    "S": "[^ \\t\\n\\r]",
    "w": "[^\\p{P}\\p{Z}\\p{C}]",
    "W": "[\\p{P}\\p{Z}\\p{C}]",
}


def _translate(pattern: str, dot_all: bool, multiline: bool, extended: bool) -> tuple[str, bool]:
    """XPath regex syntax to the engine's, and whether it has back-references:
    `.` excludes \\r as well as \\n, `$` without the m flag matches only at
    the very end, \\s is XML's four spaces, and the x flag drops whitespace
    outside character classes. Classes nest in the engine's syntax, so an
    escape is the same inside a class and out. A back-reference \\N takes
    further digits while they name a group opened before it, must follow its
    group's closing parenthesis, and matches the empty string when its group
    took no part in the match (`(?(N)\\N)`)."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    opened, open_groups, closed, backrefs = 0, list[int](), set[int](), False
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
                if m is None or (m.group(1) not in _CATEGORIES and m.group(1) not in _BLOCKS):
                    raise ExprError("unsupported character class")
                i = m.end()
                name = m.group(1)
                block = _BLOCKS.get(name)
                if block is not None:
                    out.append(f"[{'' if d == 'p' else '^'}{block}]")
                else:
                    out.append(f"\\{d}{{{name}}}")
            elif d in _ESCAPES:
                out.append(_ESCAPES[d])
            elif d in "iIcC":
                raise ExprError("XML name classes are not supported")
            elif "1" <= d <= "9":
                if in_class:
                    raise ExprError("a back-reference in a character class")
                number = int(d)
                while i < n and "0" <= pattern[i] <= "9" and number * 10 + int(pattern[i]) <= opened:
                    number, i = number * 10 + int(pattern[i]), i + 1
                if number not in closed:
                    raise ExprError("a back-reference to a group not closed before it")
                out.append(f"(?({number})\\{number})")
                backrefs = True
            else:
                out.append("\\" + d)
        elif in_class:
            if c == "[":
                if out and out[-1] == "-":
                    raise ExprError("character class subtraction is not supported")
                out.append("\\[")
            elif c in "&~":
                out.append("\\" + c)
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
            out.append("$" if multiline else "\\z")
        elif c == "(" and pattern.startswith("?", i):
            if not pattern.startswith("?:", i):
                raise ExprError("unsupported group syntax")
            out.append("(?:")
            open_groups.append(0)
            i += 2
        elif c == "(":
            opened += 1
            open_groups.append(opened)
            out.append(c)
        elif c == ")":
            if open_groups:  # else unbalanced: the engine refuses it
                closed.add(open_groups.pop())
            out.append(c)
        else:
            out.append(c)
    if in_class:
        raise ExprError("unterminated character class")
    return "".join(out), backrefs


class Backtracking:
    """A pattern with back-references (the backtracking engine): a search past
    the engine's budget fails the query with ExpressionLimit."""

    __slots__ = ("groups", "regex")

    def __init__(self, regex: Regex) -> None:
        self.regex = regex
        self.groups = regex.groups

    def search(self, text: str) -> bool:
        try:
            return self.regex.search(text)
        except RegexBudgetExceeded as error:
            raise ExpressionLimit(f"REGEX: {error}") from None

    def replace(self, text: str, parts: Sequence[str | int], max_bytes: int) -> str | None:
        try:
            return self.regex.replace(text, parts, max_bytes)
        except RegexBudgetExceeded as error:
            raise ExpressionLimit(f"REPLACE: {error}") from None


@lru_cache(maxsize=64)  # at most 64 x 2 MiB of compiled patterns (src/regexp.rs)
def compile_regex(pattern: str, flags: str) -> Regex | Backtracking | None:
    """The compiled pattern, or None if the pattern or flags are invalid or
    unsupported; ExpressionLimit if it compiles past the engine's size limit."""
    prefix = ""
    dot_all = multiline = extended = literal = False
    for flag in flags:
        if flag == "i":
            prefix += "(?i)"
        elif flag == "s":
            dot_all = True
            prefix += "(?s)"
        elif flag == "m":
            multiline = True
            prefix += "(?m)"
        elif flag == "x":
            extended = True
        elif flag == "q":
            literal = True
        else:
            return None
    try:
        if literal:
            escaped = "".join("\\" + c if c in _META else c for c in pattern)
            return Regex(("(?i)" if "(?i)" in prefix else "") + escaped)
        translated, backrefs = _translate(pattern, dot_all, multiline, extended)
        if backrefs:
            return Backtracking(Regex(prefix + translated, backtracking=True))
        return Regex(prefix + translated)
    except RegexTooBig as error:
        raise ExpressionLimit(f"a regular expression too large to run: {error}") from None
    except (ValueError, ExprError):
        return None


def regex_of(pattern: Value, flags: Value | None) -> Regex | Backtracking:
    compiled = compile_regex(simple_arg(pattern).lex, "" if flags is None else simple_arg(flags).lex)
    if compiled is None:
        raise ExprError("invalid regular expression")
    return compiled


def regex(text: Value, pattern: Value, flags: Value | None = None) -> Lit:
    return boolean(regex_of(pattern, flags).search(text_arg(text).lex))


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


def replace_with(compiled: Regex | Backtracking, replacement: str) -> Callable[[Value], Lit]:
    """REPLACE for a known pattern and replacement, keeping the input's tag.
    The engine stops building the result past the limit (a replacement
    like "$1$1$1$1" multiplies its input)."""
    if compiled.search(""):
        raise ExprError("the pattern matches the empty string")
    parts = parse_replacement(replacement, compiled.groups)

    def run(text: Value) -> Lit:
        source = text_arg(text)
        result = compiled.replace(source.lex, parts, 4 * MAX_LITERAL_CHARS)  # UTF-8: at most 4 bytes a character
        if result is None:
            raise too_long("REPLACE")
        return like(bounded(result, "REPLACE"), source)

    return run


def replace(text: Value, pattern: Value, replacement: Value, flags: Value | None = None) -> Lit:
    return replace_with(regex_of(pattern, flags), simple_arg(replacement).lex)(text)
