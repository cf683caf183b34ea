"""Parsing (Oxigraph's parser, through the native core): errors with positions, the algebra, and the bounds."""

from __future__ import annotations

import asyncio
import threading
import time
from functools import partial

import pytest

from quanta.sparql import bounds
from quanta.sparql.errors import ParserBusy, QuerySyntaxError, QueryTooComplex
from quanta.sparql.parse import INLINE_CHARS, INLINE_OPERATORS, bounded, bounded_async, parse, read, with_base
from quanta.sparql.syntax import IriTerm, LiteralTerm, PathInverse


def test_syntax_error_has_line_and_column() -> None:
    with pytest.raises(QuerySyntaxError) as error:
        parse('SELECT * WHERE {\n  ?s <http://example.org/p> "x" ;\n  ?o }')
    assert (error.value.line, error.value.column) == (3, 3)  # where `?o` starts
    assert str(error.value) == "syntax error at line 3, column 3: unexpected `?o`"


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("SELEC * {}", 1, 1, "unexpected `SELEC`"),
        ("SELECT * { ?s ?p ?o } LIMIT x", 1, 29, "unexpected `x`"),
        ('SELECT * {\n ?s ?p "é" } LIMIT x', 2, 20, "unexpected `x`"),  # columns count characters
        ("SELECT * { ?s ?p ?o", 1, 20, "unexpected the end of the query; expected"),
        ("SELECT * { ?s <rel> ?o }", 1, 1, "relative with no BASE"),
    ],
)
def test_a_syntax_error_says_what_was_found_where(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as error:
        parse(text)
    assert message in error.value.message and error.value.line == line
    if "BASE" not in message:
        assert error.value.column == column


def test_what_the_server_refuses_comes_with_the_parse() -> None:
    assert parse("SELECT DISTINCT ?s WHERE { ?s ?p ?o } ORDER BY ?s").refusals == ("DISTINCT", "ORDER BY")
    assert parse('SELECT * WHERE { ?s <http://example.org/p> "x" }').refusals == ()
    assert parse("SELECT * WHERE { ?s <http://example.org/p>+ ?o }").refusals == ("property path",)


def test_the_algebra_holds_the_query_s_own_terms() -> None:
    parsed = parse('SELECT * WHERE { ?s <http://example.org/p> "a\\"b", "c"@en, 1.5e0 }')
    triples = parsed.algebra.algebra.p.p.triples
    assert [t[2] for t in triples] == [
        LiteralTerm('a"b'),
        LiteralTerm("c", language="en"),
        LiteralTerm("1.5e0", datatype="http://www.w3.org/2001/XMLSchema#double"),
    ]


def test_an_inverse_iri_in_a_negated_property_set_is_kept() -> None:
    parsed = parse("SELECT * WHERE { ?s !(<http://x/a>|^<http://x/b>) ?o }")
    (triple,) = parsed.algebra.algebra.p.p.triples
    first, second = triple[1].args
    assert first == IriTerm("http://x/a") and second == PathInverse(IriTerm("http://x/b"))


def test_one_text_gives_one_tree() -> None:
    """spargebra names aggregates' variables and paths' blank nodes at random: they are numbered."""
    text = "SELECT (COUNT(*) AS ?n) WHERE { ?s <http://x/a>/<http://x/b> ?o }"
    assert str(parse(text).algebra.algebra) == str(parse(text).algebra.algebra)


def test_each_service_pattern_has_its_own_text() -> None:
    """rdflib gave every SERVICE the text of the query's first one."""
    parsed = parse("SELECT * WHERE { SERVICE <http://e1/> { ?s ?p ?o } SERVICE <http://e2/> { ?s ?q ?z } }")
    join = parsed.algebra.algebra.p.p
    assert "?p ?o" in join.p1.service_string and "?q ?z" in join.p2.service_string


# -- bounds (quanta.sparql.bounds): the pre-check, the parse threads, the refusals kept --

LIMITS = bounds.ParseLimits()


def union(branches: int) -> str:
    return "SELECT * WHERE { " + " UNION ".join(["{ ?s <http://x/p> ?o }"] * branches) + " }"


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("SELECT * WHERE " + "{" * 129 + " ?s ?p ?o " + "}" * 129, "QUANTA_MAX_QUERY_DEPTH"),
        ("SELECT * WHERE { FILTER(" + "(" * 200 + "1" + ")" * 200 + ") }", "QUANTA_MAX_QUERY_DEPTH"),
        ("SELECT * WHERE { FILTER(?o = " + "+".join(["1"] * 2001) + ") }", "QUANTA_MAX_QUERY_OPERATORS"),
        (union(2002), "QUANTA_MAX_QUERY_OPERATORS"),
        ("SELECT * { ?s ?p ?o } limit  99999999999999999999999", "LIMIT"),
        ("SELECT * { { SELECT * { ?s ?p ?o } OFFSET 9223372036854775808 } }", "OFFSET"),
    ],
)
def test_what_is_past_a_limit_is_refused_before_the_parser(text: str, limit: str) -> None:
    with pytest.raises(QueryTooComplex) as error:
        bounds.check(text, LIMITS)
    assert error.value.limit == limit and limit in str(error.value)


@pytest.mark.parametrize(
    "text",
    [
        union(500),  # ordinary big queries pass
        "SELECT * WHERE { VALUES ?s { " + " ".join(f"<http://x/{n}>" for n in range(10_000)) + " } ?s ?p ?o }",
        "SELECT * WHERE " + "{" * 128 + " ?s ?p ?o " + "}" * 128,
        'SELECT * WHERE { ?s ?p "(((((((((( + + + UNION" # (((((( \n }',  # strings and comments do not count
        "SELECT * { ?s ?p ?o } LIMIT 9223372036854775807",
        'SELECT * { ?s ?p "\\\\uD800" }',  # an escaped backslash, then "uD800": text
        'SELECT * { ?s ?p "\\uD7FF\\uE000\\U0010FFFF" }',
    ],
)
def test_what_is_within_the_limits_passes(text: str) -> None:
    bounds.check(text, LIMITS)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('SELECT * { ?s ?p "\\uD800" }', 1, 19),
        ('SELECT * { ?s ?p "\\udfff" }', 1, 19),
        ('SELECT * {\n  ?s ?p "\ud800" }', 2, 10),
        ("SELECT * { ?s ?p <http://x/\\U0000DBFF> }", 1, 28),
        ("PREFIX x: <http://x/>\nSELECT * { ?s x:a\\U00110000 ?o }", 2, 18),
    ],
)
def test_what_is_not_a_character_is_a_syntax_error_with_its_position(text: str, line: int, column: int) -> None:
    with pytest.raises(QuerySyntaxError) as error:
        parse(text)
    assert (error.value.line, error.value.column) == (line, column)
    assert "not a character" in error.value.message


def test_valid_deep_queries_parse() -> None:
    """35 nested groups and a 100-branch UNION were syntax errors at line 1, column 1 (recursion)."""
    parse("SELECT * WHERE " + "{ " * 35 + "?s ?p ?o " + "} " * 35)
    parse(union(100))
    parse("SELECT * WHERE " + "{ " * 128 + "?s ?p ?o " + "} " * 128)


def test_a_refused_query_is_refused_again_without_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "SELECT * WHERE { ?s ?p ?o . ?o ?q ?r ?z }"
    with pytest.raises(QuerySyntaxError) as first:
        parse(text)

    def no_parse(text: str) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr("quanta.sparql.parse.read", no_parse)
    with pytest.raises(QuerySyntaxError) as again:
        parse(text)
    assert str(again.value) == str(first.value) and again.value is not first.value
    assert again.value.__traceback__ is not None and again.value.__cause__ is None  # the parser's frames are not kept


def spin(seconds: float) -> float:
    """Python code that runs `seconds` of CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return seconds


def test_a_parse_past_its_budget_is_abandoned_and_the_thread_serves_on() -> None:
    pool = bounds.ParseThreads(1)
    started = time.perf_counter()
    with pytest.raises(QueryTooComplex) as error:
        pool.submit(lambda: spin(30), budget_s=0.2).result()
    assert time.perf_counter() - started < 5 and error.value.limit == "QUANTA_PARSE_BUDGET_S"
    assert pool.submit(lambda: spin(0.01), budget_s=1).result() == 0.01


def test_a_parse_starved_of_cpu_is_busy_not_too_complex() -> None:
    """Past its budget plus WALL_GRACE_S of wall time with CPU time left: the machine's fault, retryable."""

    def starved() -> None:
        for _ in range(300):
            time.sleep(0.01)

    with pytest.raises(ParserBusy) as error:
        bounds.ParseThreads(1).submit(starved, budget_s=0.1).result(timeout=10)
    assert error.value.kind.status == 503 and error.value.kind.retryable


def test_jobs_that_end_as_their_budget_runs_out_never_leave_a_thread_stuck() -> None:
    """The interrupt may land after the job's own code ended (the race of a watchdog and a lane)."""
    pool = bounds.ParseThreads(2)
    futures = [pool.submit(partial(spin, 0.0005 * (n % 8)), budget_s=0.002) for n in range(400)]
    outcomes = [f.exception(timeout=30) for f in futures]
    assert all(e is None or isinstance(e, QueryTooComplex) for e in outcomes)
    assert pool.submit(lambda: 42, budget_s=1).result(timeout=5) == 42


def test_the_event_loop_runs_while_a_query_is_parsed() -> None:
    async def main() -> float:
        worst, last = 0.0, time.perf_counter()
        long_text = "SELECT * {}" + " " * INLINE_CHARS  # a short text is read in place
        task = asyncio.create_task(bounded_async(lambda: spin(0.5), long_text))
        while not task.done():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now
        assert await task == 0.5
        return worst

    assert asyncio.run(main()) < 0.25


def test_queries_parsed_at_once_on_several_threads_all_parse() -> None:
    """rdflib's parser keeps state while it parses: two at once failed inside pyparsing (and the
    failure, a 'syntax error', was then remembered as the query's)."""

    def shapes(n: int) -> list[str]:
        return [
            f"SELECT ?s (CONCAT(?o, 'x') AS ?y) WHERE {{ ?s <http://e/p{n}> ?o ."
            + f" ?s <http://e/r> ?w{i} ." * (i % 4)
            + f" OPTIONAL {{ ?s <http://e/q> ?z FILTER(?z > {i} + {n}) }} }} LIMIT {i + 1}"
            for i in range(12)
        ]

    errors: list[BaseException] = []

    def parse_all(n: int) -> None:
        for text in shapes(n):
            try:
                parse(text)
            except QuerySyntaxError as error:
                errors.append(error)

    threads = [threading.Thread(target=parse_all, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_short_text_is_read_in_place_and_a_long_one_on_a_parse_thread() -> None:
    """The hop to a parse thread (~0.2 ms) costs more than reading a short query."""
    short = "SELECT * WHERE { ?s ?p ?o }"
    assert bounded(threading.get_ident, short) == threading.get_ident()
    assert bounded(threading.get_ident, short + " " * INLINE_CHARS) != threading.get_ident()
    deep = "SELECT * WHERE " + "{ " * 20 + "?s ?p ?o " + "} " * 20  # short, but deeper than INLINE_DEPTH
    assert bounded(threading.get_ident, deep) != threading.get_ident()
    # short and shallow, but with more operators than INLINE_OPERATORS: its reading may cost more
    busy = "SELECT * WHERE { ?s ?p ?o FILTER(" + " || ".join(f"?o = {n}" for n in range(INLINE_OPERATORS + 1)) + ") }"
    assert bounded(threading.get_ident, busy) != threading.get_ident()


def test_a_query_and_its_base_are_read_once_as_the_text_a_worker_is_sent() -> None:
    """The gateway reads a query with the endpoint's URL as its base, then compiles the text it
    sends a worker, `BASE <url>` and the query: the one tree serves both."""
    text = "SELECT ?o WHERE { <a> <http://e/p> ?o }"
    base = "http://example.org/sparql/x"
    tree = read(text, base)
    assert read(with_base(text, base), None) is tree
    pattern = tree.algebra.algebra.p.p
    assert str(pattern.triples[0][0]) == "http://example.org/sparql/a"


def test_a_syntax_error_of_a_query_read_with_a_base_is_placed_in_its_own_text() -> None:
    text = "SELECT ?o\nWHERE { ?s ?p }"
    with pytest.raises(QuerySyntaxError) as without_base:
        read(text)
    with pytest.raises(QuerySyntaxError) as caught:
        read(text, "http://example.org/sparql/x")
    assert (caught.value.line, caught.value.column) == (without_base.value.line, without_base.value.column) == (2, 9)
