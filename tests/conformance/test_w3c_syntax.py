"""The W3C SPARQL 1.0 and 1.1 query syntax tests through the service's parser
(`quanta.sparql.parse`: Oxigraph's spargebra in the native core, behind the bounds).

A positive test must parse; a negative one must be a syntax error (400), never
another failure. Each query gets its file's IRI as BASE, as in the evaluation tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rdflib import RDF, Graph

from quanta.sparql.errors import QuerySyntaxError
from quanta.sparql.parse import parse

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make the helpers importable
from harness import ROOT
from manifest import MF, _list, _local

MANIFESTS = ["sparql10/manifest-syntax.ttl", "sparql11/syntax-query/manifest.ttl", "sparql11/syntax-fed/manifest.ttl"]
POSITIVE = {MF.PositiveSyntaxTest, MF.PositiveSyntaxTest11}
NEGATIVE = {MF.NegativeSyntaxTest, MF.NegativeSyntaxTest11}
EXPECTED_CASES = 296
# Where spargebra departs from the grammar, run as strict xfail (an XPASS fails: remove the entry)
PARSER_DEVIATIONS = {
    "sparql10/syntax-sparql3/syn-bad-26": "spargebra reads `?x<?a&&?b>?y` as comparisons, not by the "
    "longest-token rule (an IRI `<?a&&?b>`, then not an expression)",
}


@dataclass(frozen=True)
class SyntaxCase:
    id: str
    query: Path
    positive: bool


def _cases() -> list[SyntaxCase]:
    cases: list[SyntaxCase] = []
    seen: set[Path] = set()
    pending = [(ROOT / m).resolve() for m in MANIFESTS]
    while pending:
        path = pending.pop(0)
        if path in seen or not path.exists():
            continue
        seen.add(path)
        graph = Graph()
        graph.parse(path, format="turtle", publicID=path.as_uri())
        me = next(graph.subjects(RDF.type, MF.Manifest))
        pending += [_local(i) for i in _list(graph, me, MF.include)]
        suite = path.parent.relative_to(ROOT.resolve()).as_posix()
        for entry in _list(graph, me, MF.entries):
            kinds = set(graph.objects(entry, RDF.type))
            if kinds & (POSITIVE | NEGATIVE):
                name = str(entry).rsplit("#", 1)[-1].rsplit("/", 1)[-1]
                query = _local(graph.value(entry, MF.action))
                cases.append(SyntaxCase(f"{suite}/{name}", query, bool(kinds & POSITIVE)))
    return cases


CASES = _cases() if ROOT.exists() else []


def _params() -> list[object]:
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(reason=PARSER_DEVIATIONS[case.id], strict=True)]
            if case.id in PARSER_DEVIATIONS
            else [],
        )
        for case in CASES
    ]


@pytest.mark.parametrize("case", _params())
def test_syntax(case: SyntaxCase) -> None:
    text = f"BASE <{case.query.as_uri()}>\n" + case.query.read_text(encoding="utf-8")
    if case.positive:
        parse(text)
    else:
        with pytest.raises(QuerySyntaxError):
            parse(text)


def test_syntax_suites_found() -> None:
    assert len(CASES) >= EXPECTED_CASES, f"expected the W3C syntax tests under {ROOT}, found {len(CASES)}"
