"""REGEX with back-references runs on a backtracking engine under a budget, against a real
service: a catastrophic back-reference pattern fails the query at once with a 422
`expression-limit` naming the backtracking budget, in a worker (/v1) and in the gateway's smart
client (/sparql, above an OPTIONAL), while a bystander's small query keeps answering within a
second; a benign one answers the rows Python's re finds (pyoxigraph, whose engine is linear,
refuses back-references)."""

from __future__ import annotations

import re

import httpx
import pytest

from .conftest import Service
from .test_hardening_expressions import LIKES, attack, bindings, run

# The attacker and the bystander share an address: no rate limit, so only the attack can slow the bystander.
SERVICE_OPTIONS = {"QUANTA_SPARQL_QUERY_RATE": "0", "QUANTA_RATE_LIMIT": "0"}
ALMOST = "a" * 40 + "!"
# Each exponential in a backtracking engine over ALMOST (fancy-regex alone finds ^(a+)+\1$ false at once).
CATASTROPHIC = ["^(a|aa)+\\\\1$", "(a|aa)+\\\\1$", "^(a|a?)+\\\\1$"]
WORDS = ["aardvark", "book", "llama", "abc", "zoo", "Mississippi", "été", "xx", "x"]


def where(route: str, inner: str) -> str:
    """A group the gateway evaluates client-side on /sparql (a FILTER above an OPTIONAL)."""
    if route == "sparql":
        return f"{{ {inner} OPTIONAL {{ ?x {LIKES} ?o }} }}"
    return inner


def bind(route: str, text: str) -> str:
    """?x bound to `text` (no quote nor backslash in it), for `route`."""
    return where(route, f'BIND("{text}" AS ?x)')


@pytest.mark.parametrize("route", ["v1", "sparql"])
@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_back_reference_is_a_422(module_service: Service, route: str, pattern: str) -> None:
    query = f'SELECT ?x WHERE {{ {bind(route, ALMOST)} FILTER(REGEX(?x, "{pattern}")) }}'
    response, took = attack(module_service, route, query)
    assert response.status_code == 422, response.text[:300]
    problem = response.json()
    assert problem["type"] == "https://quanta.dev/problems/expression-limit"
    assert "exceeded its backtracking budget" in problem["detail"]
    assert took < 5


@pytest.mark.parametrize("route", ["v1", "sparql"])
def test_replace_with_a_catastrophic_back_reference_is_a_422(module_service: Service, route: str) -> None:
    query = f'SELECT ?y WHERE {{ {bind(route, ALMOST)} BIND(REPLACE(?x, "(a|aa)+\\\\1$", "b") AS ?y) }}'
    response, _ = attack(module_service, route, query)
    assert response.status_code == 422, response.text[:300]
    assert "REPLACE: the regular expression exceeded its backtracking budget" in response.json()["detail"]


@pytest.mark.parametrize("route", ["v1", "sparql"])
def test_a_long_input_to_a_back_reference_is_a_422(module_service: Service, route: str) -> None:
    query = f'SELECT ?x WHERE {{ {bind(route, "ab" * 600)} FILTER(REGEX(?x, "(a)\\\\1")) }}'
    response, _ = attack(module_service, route, query)
    assert response.status_code == 422, response.text[:300]
    assert "strings of at most 1024 bytes" in response.json()["detail"]


@pytest.mark.parametrize("route", ["v1", "sparql"])
def test_a_benign_back_reference_answers_as_python_re(module_service: Service, route: str) -> None:
    values = " ".join(f'"{w}"' for w in WORDS)
    filtered = f'SELECT ?x WHERE {{ {where(route, f"VALUES ?x {{ {values} }}")} FILTER(REGEX(?x, "^(.)\\\\1")) }}'
    rows = bindings(run(module_service, route, filtered))
    found = sorted(str(row["x"]["value"]) for row in rows)  # type: ignore[index]
    assert found == sorted(w for w in WORDS if re.search(r"^(.)\1", w)) == ["aardvark", "llama", "xx"]
    # anywhere in the word, case-insensitively, with the pattern a variable (not compiled once)
    bound = (
        f'SELECT ?x ?r WHERE {{ {where(route, f"VALUES ?x {{ {values} }}")} BIND("(.)\\\\1" AS ?p) '
        'BIND(REGEX(?x, ?p, "i") AS ?r) }'
    )
    rows = bindings(run(module_service, route, bound))
    got = {str(row["x"]["value"]): row["r"]["value"] == "true" for row in rows}  # type: ignore[index]
    assert got == {w: re.search(r"(?i)(.)\1", w) is not None for w in WORDS}
    replaced = f'SELECT ?y WHERE {{ {bind(route, "Mississippi")} BIND(REPLACE(?x, "(.)\\\\1", "<$1>") AS ?y) }}'
    (row,) = bindings(run(module_service, route, replaced))
    assert row["y"]["value"] == re.sub(r"(.)\1", r"<\1>", "Mississippi") == "Mi<s>i<s>i<p>i"  # type: ignore[index]


def test_the_service_still_answers_after_the_attacks(module_service: Service) -> None:
    with httpx.Client(base_url=module_service.url, timeout=10) as http:
        assert http.get("/healthz").status_code == 200
