"""Parse SPARQL text with Oxigraph's parser (spargebra, in the native core), once per query text.

spargebra parses a query in microseconds, in time linear in its text, and
names a syntax error's line and column; `quanta.sparql.translate` makes its
algebra the tree the planner and compiler walk. `quanta.sparql.bounds`
checks the text first (nesting, operators), and the parse runs within its
budget, with whatever walks the tree after it (plan, compile).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

from quanta.native import _core
from quanta.sparql import bounds
from quanta.sparql.errors import QuerySyntaxError, QueryTooComplex
from quanta.sparql.fragment import query_refusals, whole_refusals
from quanta.sparql.translate import Query, translate

T = TypeVar("T")

# A text this short, shallow and plain is read (and planned, compiled) on the caller's thread:
# at most ~12 ms for the costliest such text (150 triple patterns), and a few hundred microseconds
# for a usual one, against ~0.2 ms for the hop to a parse thread; the operators bound the
# costliest reading per character (a FILTER of 176 `||` in 2,048 characters took 27 ms). Others
# go to the parse threads and their budget.
INLINE_CHARS = 4096
INLINE_DEPTH = 16
INLINE_OPERATORS = 32

# `true` and `false` in any case (spargebra reads them in lower case only), and what is
# skipped whole so that its contents never are: comments, strings, IRIs, names around them
_BOOLEANS = re.compile(
    r"""(?P<skip>\#[^\n]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|<[^<>"{}|^`\\\x00-\x20]*>)
      | (?<![\w?$:.-])(?P<word>(?i:true|false))(?![\w:.-])""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    algebra: Query
    refusals: tuple[str, ...]  # fragment.query_refusals of the whole query
    _whole: list[tuple[str, ...]] = field(default_factory=list, compare=False, repr=False)

    def whole_refusals(self) -> tuple[str, ...]:
        """`fragment.whole_refusals` of the query, worked out once: the gateway's smart client
        asks it of a query it sends whole, then its first quantum compiles the same tree."""
        if not self._whole:
            self._whole.append(tuple(whole_refusals(self.algebra.algebra)))
        return self._whole[0]


_refused = bounds.Refusals()


def parse(text: str, base: str | None = None) -> ParsedQuery:
    """Parse a query within `quanta.sparql.bounds` (checked first, then on a parse
    thread under the parse budget); raise QuerySyntaxError with the line and column,
    or QueryTooComplex naming the limit. A refused text is refused again at no cost."""
    return bounded(lambda: read(text, base), text, base)


def bounded(call: Callable[[], T], text: str, base: str | None = None) -> T:
    """`call()`, which parses `text` (and may walk its tree further: plan, compile), within
    the bounds; a refusal of `text` (against `base`) is remembered. Blocks the calling thread
    (see `bounded_async`)."""
    with _refusals_kept(text, base) as short:
        return bounds.in_place(call) if short else bounds.run(call)


async def bounded_async(call: Callable[[], T], text: str, base: str | None = None) -> T:
    """`bounded`, with the event loop free meanwhile (the gateway's)."""
    with _refusals_kept(text, base) as short:
        return bounds.in_place(call) if short else await bounds.run_async(call)


@contextmanager
def _refusals_kept(text: str, base: str | None) -> Iterator[bool]:
    """Refuse `text` at once if it was refused before, else check it; remember a refusal.
    Gives whether the text is short enough to be read in place."""
    key = text if base is None else f"{base}\n{text}"  # a relative IRI is an error with no base only
    refused = _refused.get(key)
    if refused is not None:
        raise refused
    try:
        depth, operators = bounds.check(text)
        yield len(text) <= INLINE_CHARS and depth <= INLINE_DEPTH and operators <= INLINE_OPERATORS
    except (QuerySyntaxError, QueryTooComplex) as error:
        _refused.put(key, error)
        raise


def read(text: str, base: str | None = None) -> ParsedQuery:
    """`parse` without the bounds: only inside `bounded` (a plan that parses, say). A short
    text read lately is not read again (`read_kept`); its tree is never changed after.
    A text and its base are read as `with_base(text, base)`, the text the client sends a
    worker: the gateway's own first quantum then finds the client's tree, not a second reading."""
    if len(text) > KEPT_CHARS:
        return _read(text, base)
    if base is None:
        return read_kept(text, None)
    try:
        return read_kept(with_base(text, base), None)
    except QuerySyntaxError:  # the error's line and column are the text's own (or the base was no IRIREF)
        return _read(text, base)


def with_base(text: str, base: str | None) -> str:
    """`text` with relative IRIs resolved against `base`, spelled in the text itself."""
    return text if base is None else f"BASE <{base}>\n{text}"


def _read(text: str, base: str | None) -> ParsedQuery:
    tree: tuple[Any, ...] | None
    try:
        tree = _core.parse_query(text, base)
    except _core.SparqlSyntaxError as error:
        tree = _with_booleans_in_lower_case(text, base)
        if tree is None:
            message, line, column = error.args
            raise QuerySyntaxError(message, line, column) from None
    try:
        query = translate(tree, text)
    except ValueError as error:  # SPARQL 1.2 forms spargebra reads and quanta does not
        raise QuerySyntaxError(str(error), 1, 1) from None
    return ParsedQuery(query, tuple(query_refusals(query.algebra)))


# The gateway reads each query twice (the smart client's plan, then the first quantum it runs
# itself compiles it), and a worker sees a text again when clients repeat it. Longer texts are
# rare, and their trees large.
KEPT_CHARS = 8192
read_kept = lru_cache(maxsize=256)(_read)


def _with_booleans_in_lower_case(text: str, base: str | None) -> tuple[Any, ...] | None:
    """The tree of `text` with TRUE, False... as `true` and `false` (SPARQL's keywords
    are case-insensitive); None if there are none or it is still not SPARQL."""
    changed = _BOOLEANS.sub(lambda m: m.group().lower() if m.group("word") else m.group(), text)
    if changed == text:
        return None
    try:
        return _core.parse_query(changed, base)
    except _core.SparqlSyntaxError:
        return None
