"""REGEX and REPLACE: XPath regular expressions (F&O 7.6) on Python's re.

The syntaxes mostly agree; the translation handles where they do not, and
refuses (as an evaluation error) the few XPath features re lacks: character
class subtraction, \\i and \\c, and most \\p{...} blocks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from quanta.sparql.expr_values import ExprError, Lit, Value, boolean, like, simple_arg, text_arg

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
    except (re.error, ExprError, OverflowError, RecursionError):
        return None


def regex_of(pattern: Value, flags: Value | None) -> re.Pattern[str]:
    compiled = compile_regex(simple_arg(pattern).lex, "" if flags is None else simple_arg(flags).lex)
    if compiled is None:
        raise ExprError("invalid regular expression")
    return compiled


def regex(text: Value, pattern: Value, flags: Value | None = None) -> Lit:
    return boolean(regex_of(pattern, flags).search(text_arg(text).lex) is not None)


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
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in parts)

    def run(text: Value) -> Lit:
        source = text_arg(text)
        return like(compiled.sub(expand, source.lex), source)

    return run


def replace(text: Value, pattern: Value, replacement: Value, flags: Value | None = None) -> Lit:
    return replace_with(regex_of(pattern, flags), simple_arg(replacement).lex)(text)
