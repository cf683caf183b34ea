"""Parse SPARQL text with rdflib, once per query *shape*.

rdflib's parser costs 5-35 ms a query. Queries from one application differ
mostly in their constants, so absolute IRIs and string literals are swapped
for numbered placeholders and the placeholder text is parsed once (LRU
cache); the compiler maps placeholders back to the query's own constants.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from types import MethodType
from typing import Any, TypeVar

from pyparsing import Literal as Keyword
from pyparsing import MatchFirst, ParseException, ParseResults, original_text_for
from rdflib.plugins.sparql import parser as grammar
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery
from rdflib.plugins.sparql.parserutils import Comp, CompValue, Param
from rdflib.term import Literal, Node, URIRef

import quanta.sparql.terms  # noqa: F401  (sets rdflib.NORMALIZE_LITERALS before any Literal is made)
from quanta.sparql import bounds
from quanta.sparql.errors import QuerySyntaxError, QueryTooComplex
from quanta.sparql.fragment import query_refusals
from quanta.sparql.terms import unescape_lexical


def _fix_rdflib_grammar() -> None:
    """Two defects of rdflib 7's SPARQL grammar, mended in place before any parse:

    - `!^p` (an inverse IRI in a negated property set) kept no IRI: it is now
      `CompValue("InversePath", part=p)` among the NegatedPath's arguments;
    - every SERVICE pattern got the text of the query's first one as its
      `service_string`: each now gets its own (the text where it matched).
    """
    choices = grammar.PathOneInPropertySet  # iri | A | Comp("InversePath", "^" + (iri | A))
    assert isinstance(choices, MatchFirst)
    inverse = next(e for e in choices.exprs if isinstance(e, Comp))
    inverse.expr = Keyword("^").suppress() + Param("part", grammar.iri | grammar.A)
    service = grammar.ServiceGraphPattern
    own_text = original_text_for(service.expr)

    def post_parse(self: Comp, instring: str, loc: int, tokens: ParseResults) -> CompValue:
        value = Comp.postParse(self, instring, loc, tokens)
        # `loc` is where this pattern ends: its text is the SERVICE pattern that ends there
        for found, _, end in own_text.scan_string(instring):
            if end == loc:
                value["service_string"] = found[0]
        return value

    service.postParse = MethodType(post_parse, service)  # type: ignore[method-assign]


_fix_rdflib_grammar()

T = TypeVar("T")

PLACEHOLDER_IRI = "urn:quanta:constant:"
PLACEHOLDER_STRING = "quanta-constant-"

# Strings and IRIs, plus what must be skipped whole (comments) so that their
# contents are never mistaken for tokens.
_TOKENS = re.compile(
    r"""
    (?P<comment>\#[^\n]*)
  | (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"
              |'''(?:[^'\\]|\\.|'(?!''))*'''
              |"(?:[^"\\\n]|\\.)*"
              |'(?:[^'\\\n]|\\.)*')
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
    """,
    re.VERBOSE,
)
# The IRI of a PREFIX or BASE declaration (group 1): kept, never a constant.
_DECLARED_IRI = re.compile(r"(?:PREFIX\s+[^\s:]*:|BASE)\s*(<)", re.IGNORECASE)
_CALL = re.compile(r"\s*\(")  # after an IRI: a function name
_DATATYPE_MARK = re.compile(r"\s*\^\^")  # after a string: a typed literal


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    algebra: Any  # rdflib.plugins.sparql.sparql.Query
    constants: dict[str, str]  # placeholder -> original IRI or string lexical form
    refusals: tuple[str, ...]  # fragment.query_refusals of the whole query (once per shape)

    def constant(self, node: Node) -> Node:
        """The query's own constant behind a placeholder (other nodes unchanged)."""
        if isinstance(node, URIRef) and node.startswith(PLACEHOLDER_IRI):
            return URIRef(self.constants[str(node)])
        if isinstance(node, Literal) and str(node) in self.constants:
            return Literal(self.constants[str(node)], lang=node.language, datatype=node.datatype)
        return node


def normalize(text: str) -> tuple[str, dict[str, str]]:
    """Replace constants by placeholders. IRIs stay when they are declarations
    (PREFIX, BASE), function names (followed by '('), datatypes ('^^') or
    relative; strings stay when they are typed literals. One pass over the
    text: what precedes or follows a token is looked at in place, not copied."""
    constants: dict[str, str] = {}
    out: list[str] = []
    last = 0
    declared = {m.start(1) for m in _DECLARED_IRI.finditer(text)}
    for match in _TOKENS.finditer(text):
        kind, token = match.lastgroup, match.group()
        start, end = match.span()
        if kind == "iri":
            iri = token[1:-1]
            if ":" not in iri or start in declared or _CALL.match(text, end) or _after_datatype_mark(text, start):
                continue
            placeholder = f"{PLACEHOLDER_IRI}{len(constants)}"
            constants[placeholder] = unescape_lexical(iri)
            replacement = f"<{placeholder}>"
        elif kind == "string":
            if _DATATYPE_MARK.match(text, end):
                continue  # rdflib converts typed values while parsing: keep them
            quote = 3 if token[:3] in ('"""', "'''") else 1
            placeholder = f"{PLACEHOLDER_STRING}{len(constants)}"
            constants[placeholder] = unescape_lexical(token[quote:-quote])
            replacement = f'"{placeholder}"'
        else:
            continue
        out.append(text[last:start])
        out.append(replacement)
        last = end
    out.append(text[last:])
    return "".join(out), constants


def _after_datatype_mark(text: str, start: int) -> bool:
    """Whether `^^`, then only white space, comes right before `start`."""
    i = start
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return text.startswith("^^", i - 2, i)


# rdflib's parser is not thread-safe (pyparsing's grammar objects keep state while they parse:
# two parse threads at once failed with errors from inside pyparsing): one parse at a time.
_rdflib = threading.Lock()


def _parsed(text: str) -> tuple[Any, tuple[str, ...]]:
    """The algebra of `text`, and what of it the server refuses."""
    with _rdflib:
        algebra = translateQuery(parseQuery(text))
    return algebra, tuple(query_refusals(algebra.algebra))


_parse_shape = lru_cache(maxsize=2048)(_parsed)


_refused = bounds.Refusals()


def parse(text: str) -> ParsedQuery:
    """Parse a query within `quanta.sparql.bounds` (checked first, then on a parse
    thread under the parse budget); raise QuerySyntaxError with the line and column,
    or QueryTooComplex naming the limit. A refused text is refused again at no cost."""
    return bounded(lambda: read(text), text)


def bounded(call: Callable[[], T], text: str) -> T:
    """`call()`, which parses `text` (and may walk its tree further: plan, compile), within
    the bounds; a refusal of `text` is remembered. Blocks the calling thread (see `bounded_async`)."""
    with _refusals_kept(text):
        return bounds.run(call)


async def bounded_async(call: Callable[[], T], text: str) -> T:
    """`bounded`, with the event loop free meanwhile (the gateway's)."""
    with _refusals_kept(text):
        return await bounds.run_async(call)


@contextmanager
def _refusals_kept(text: str) -> Iterator[None]:
    """Refuse `text` at once if it was refused before, else check it; remember a refusal."""
    refused = _refused.get(text)
    if refused is not None:
        raise refused
    try:
        bounds.check(text)
        yield
    except (QuerySyntaxError, QueryTooComplex) as error:
        _refused.put(text, error)
        raise


def read(text: str) -> ParsedQuery:
    """`parse` without the bounds: only inside `bounded` (a plan that parses, say)."""
    shape, constants = normalize(text)
    try:
        algebra, refusals = _parse_shape(shape)
        return ParsedQuery(algebra, constants, refusals)
    except ParseException:
        pass  # placeholders shift columns: report the error on the original text
    except RecursionError:
        raise
    except Exception as error:  # rdflib reports some static errors untyped
        raise QuerySyntaxError(str(error), 1, 1) from error
    try:
        algebra, refusals = _parsed(text)
        return ParsedQuery(algebra, {}, refusals)
    except ParseException as error:
        raise QuerySyntaxError(error.msg, error.lineno, error.col) from error
    except RecursionError:
        raise
    except Exception as error:
        raise QuerySyntaxError(str(error), 1, 1) from error
