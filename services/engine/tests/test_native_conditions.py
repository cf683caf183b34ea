"""FILTERs evaluated by the native core (`operators.native.native_condition`,
src/expr.rs) are the Python operators row for row and step for step, over
values of every kind the evaluator meets: integers in and out of 64 bits and
of their types' ranges, decimals, doubles and floats with NaN and the
infinities, booleans, strings with and without tags, dates, unknown and
ill-typed datatypes, IRIs and blank nodes. Rows the native evaluator does not
decide exactly go to the Python test; the common kinds never do."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from quanta.engine.execute import decode, run
from quanta.engine.operators.native import NativeTree
from quanta.engine.quantum import Quantum
from quanta.engine.sparql.compile import compile_query
from quanta.engine.storage import TripleStore, open_store
from quanta.engine.testing import write_hdt


def _sibling(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_conditions_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_native = _sibling("test_native_execution")
XSD = "http://www.w3.org/2001/XMLSchema#"


def typed(lex: str, local: str) -> str:
    return f'"{lex}"^^<{XSD}{local}>'


DATES = ("2020-01-01T00:00:00Z", "2019-12-31T23:00:00-01:00", "2020-01-01T10:00:00", "2020-01-03T00:00:00.5")
COMMON = [
    *(typed(v, "integer") for v in ("0", "1", "-7", "+3", "007", "9223372036854775807")),
    *(typed(v, "double") for v in ("1.5e0", "2", "NaN", "INF", "-INF", "-0")),
    typed("1.1", "float"),
    typed("16777217", "float"),
    *(typed(v, "boolean") for v in ("true", "false", "1", "0")),
    *('""', '"abc"', '"ABC"', '"a\\"b"', '"\\u00FC"', '"abc"@en', '"abc"@en-us', '"abc"@fr', '"2"'),
    typed("abc", "string"),
    typed("12", "int"),
    typed("5", "unsignedLong"),
    "<http://example.org/a>",
    "<http://example.org/abc>",
    "_:b1",
]
RARE = [
    typed("9223372036854775808", "integer"),
    typed("-123456789012345678901234567890123456789012", "integer"),
    typed("200", "byte"),
    typed("-1", "nonNegativeInteger"),
    typed("abc", "integer"),
    typed("18446744073709551615", "unsignedLong"),
    *(typed(v, "decimal") for v in ("1.5", "-0.0", "2.", ".5", "1.00000000000000000001", "x")),
    typed("1e400", "double"),
    typed("abc", "double"),
    typed("yes", "boolean"),
    *(typed(v, "dateTime") for v in DATES),
    typed("2020-01-01", "date"),
    typed("2020-01-01Z", "date"),
    typed("bad", "dateTime"),
    '"x"^^<http://example.org/t>',
    '"abc"^^<http://example.org/t>',
]
EXPRESSIONS = [
    "?a = ?b",
    "?a != ?b",
    "?a < ?b",
    "?a <= ?b",
    "?a > ?b",
    "?a >= ?b",
    "sameTerm(?a, ?b)",
    "?a + ?b > 2",
    "?a * ?b = ?a",
    "?a - ?b < 0",
    "?a / ?b > 1",
    "-?a < +?b",
    '?a IN (?b, 1, "abc")',
    "?a NOT IN (?b, 2e0)",
    "STRSTARTS(?a, ?b)",
    "CONTAINS(?a, ?b) || STRENDS(?b, ?a)",
    'LANGMATCHES(LANG(?a), "en")',
    'LANGMATCHES(LANG(?b), "*")',
    "IF(?a, ?b, ?a) = ?b",
    "COALESCE(?a * 2, ?b) > 0",
    "STRLEN(STR(?a)) > STRLEN(STR(?b))",
    "ISNUMERIC(?a) && !ISLITERAL(?b)",
    "ISIRI(?a) || ISBLANK(?b)",
    "DATATYPE(?a) = DATATYPE(?b)",
    "LANG(?a) = LANG(?b) && STR(?a) = STR(?b)",
    'REGEX(?a, "^a", "i")',
    'REGEX(STR(?a), "[0-9]+") && !REGEX(?b, "b")',
    "?a",
    "!?a || ?b",
    "?a && ?b",
    "BOUND(?a) && ?a != <http://example.org/a>",
    'UCASE(?a) = "ABC" || LCASE(?b) = "abc"',
    "SUBSTR(?a, 2) = SUBSTR(?b, 1, 2) || SUBSTR(?a, ?b) != ?a",
    'STRBEFORE(?a, "b") = STRAFTER(?b, "a") || STRAFTER(?a, ?b) = ""',
    'CONCAT(?a, ?b) = "abcabc" || STRLEN(CONCAT(?a, "x", ?b)) > 3',
    "ABS(?a) > ROUND(?b) || CEIL(?a) = FLOOR(?b)",
    "YEAR(?a) = 2020 || MONTH(?a) < DAY(?b) || HOURS(?a) > MINUTES(?b)",
    'TZ(?a) = "Z" || TZ(?b) = "" || DAY(?a) = 1',
    'ENCODE_FOR_URI(?a) != ?a || STRLANG(?a, "en") = ?b || STRDT(?a, <http://www.w3.org/2001/XMLSchema#integer>) = ?b',
]


def dataset(values: list[str]) -> str:
    lines = [f"<http://example.org/s{i}> <http://example.org/v> {v} ." for i, v in enumerate(values)]
    lines += [f"<http://example.org/t{i}> <http://example.org/w> {v} ." for i, v in enumerate(values)]
    return "\n".join(lines) + "\n"


def query(expression: str) -> str:
    return f"SELECT ?a ?b WHERE {{ ?s <http://example.org/v> ?a . ?t <http://example.org/w> ?b FILTER({expression}) }}"


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory: pytest.TempPathFactory) -> TripleStore:
    path = write_hdt(dataset(COMMON + RARE), tmp_path_factory.mktemp("conditions"))
    return open_store(str(path), name="kinds", backend="native")


@pytest.fixture(scope="module")
def common_kinds(tmp_path_factory: pytest.TempPathFactory) -> TripleStore:
    path = write_hdt(dataset(COMMON), tmp_path_factory.mktemp("common"))
    return open_store(str(path), name="common", backend="native")


def native(plan_root: object) -> NativeTree:
    assert isinstance(plan_root, NativeTree), type(plan_root).__name__
    return plan_root


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_native_conditions_are_the_python_operators(
    every_kind: TripleStore, expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = query(expression)
    assert _native.uses_native(every_kind, q), "the filter runs natively"
    steps = _native.total_steps(every_kind, q)
    _native.compare(every_kind, q, monkeypatch, every=max(1, steps // 12))


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_common_values_are_decided_natively(common_kinds: TripleStore, expression: str) -> None:
    """Over integers, doubles, floats, booleans, strings, IRIs and blank nodes
    no row goes to the Python test, but a sum, difference or product past 64
    bits (at most the 15 pairs of integers with 2^63 - 1 in them, or every row
    where ?a is 2^63 - 1), a quotient of integers (a decimal: the 8 x 8 pairs) and
    the case of non-ASCII text (the rows with "ü")."""
    plan = compile_query(query(expression), common_kinds)
    quantum = Quantum(None)
    plan.ctx.quantum = quantum
    _, done = run(plan, quantum)
    assert done
    tree = native(plan.root)
    allowed = {"?a + ?b > 2": 15, "?a * ?b = ?a": 15, "?a - ?b < 0": 15, "?a / ?b > 1": 64}
    allowed["COALESCE(?a * 2, ?b) > 0"] = len(COMMON)
    allowed['UCASE(?a) = "ABC" || LCASE(?b) = "abc"'] = 2 * len(COMMON)  # "ü": Unicode's case mappings
    assert tree.pipeline.undecided <= allowed.get(expression, 0), tree.pipeline.undecided


@pytest.mark.parametrize("expression", ["?a = ?b", "?a != ?b", "?a < ?b", "?a >= ?b", "?a IN (?b, 1.50)", "?a"])
def test_decimals_big_integers_and_dates_compare_natively(tmp_path: Path, expression: str) -> None:
    """Decimals and integers of any size are compared exactly by their digits, dates on the
    time line (with XSD's partial order across timezones), natively."""
    values = [*COMMON, *(typed(v, "decimal") for v in ("1.5", "-0.0", "2.", ".5", "1.00000000000000000001"))]
    values += [typed("123456789012345678901234567890", "integer"), typed("-9223372036854775809", "integer")]
    values += [*(typed(v, "dateTime") for v in DATES), typed("2020-01-01", "date"), typed("2020-01-01Z", "date")]
    store = open_store(str(write_hdt(dataset(values), tmp_path)), backend="native")
    plan = compile_query(query(expression), store)
    quantum = Quantum(None)
    plan.ctx.quantum = quantum
    assert run(plan, quantum)[1]
    assert native(plan.root).pipeline.undecided == 0


def test_rare_values_are_decided_by_the_python_test(every_kind: TripleStore) -> None:
    """An ill-formed dateTime compared with a date goes to the reference, and is still answered."""
    plan = compile_query(query("?a < ?b"), every_kind)
    quantum = Quantum(None)
    plan.ctx.quantum = quantum
    rows, done = run(plan, quantum)
    assert done and rows and native(plan.root).pipeline.undecided > 0


def test_a_regex_with_back_references_is_decided_by_the_python_test(
    every_kind: TripleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backtracking engine's budget fails the query from Python (ExpressionLimit),
    so a pattern with a back-reference is not run natively: every row the FILTER sees
    goes to the Python test, and the answer is the Python operators'."""
    q = query('REGEX(?a, "(a)\\\\1")')
    plan = compile_query(q, every_kind)
    plan.ctx.quantum = quantum = Quantum(None)
    _, done = run(plan, quantum)
    assert done and native(plan.root).pipeline.undecided == len(COMMON + RARE)  # the FILTER follows ?a's scan
    _native.compare(every_kind, q, monkeypatch, every=max(1, _native.total_steps(every_kind, q) // 12))


def test_an_error_of_the_python_test_fails_the_run(tmp_path: Path) -> None:
    """A row the native evaluator hands over (a product past 64 bits) whose Python
    test raises (an integer past the expression limit) fails the run with that error."""
    from quanta.sparql.expr_values import ExpressionLimit

    huge = typed("9" * 4000, "integer")
    store = open_store(str(write_hdt(dataset([huge, typed("2", "integer")]), tmp_path)), backend="native")
    plan = compile_query(query("?a * ?a > ?b"), store)
    quantum = Quantum(None)
    plan.ctx.quantum = quantum
    native(plan.root)
    with pytest.raises(ExpressionLimit):
        run(plan, quantum)


BINDS = [
    "?a",  # a term of the dictionary: its id, natively
    "IF(ISNUMERIC(?a), ?a, <http://example.org/a>)",
    "COALESCE(?a * ?a, ?a)",  # computed numbers: the Python function makes their ids
    "STR(?a)",
    '"a constant"',
    "?a + 1",
    "1/0",  # an error: unbound
    'CONCAT(?a, "!")',
    "ROUND(?a)",
    "YEAR(?a)",
]


@pytest.mark.parametrize("expression", BINDS)
@pytest.mark.parametrize("where", ["between", "after"])
def test_native_binds_are_the_python_operators(
    every_kind: TripleStore, expression: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BIND inside a chain (between its joins or above them) is the Python operator,
    step for step, and keeps the chain native."""
    v, w = "<http://example.org/v>", "<http://example.org/w>"
    if where == "between":
        q = f"SELECT ?a ?b ?c WHERE {{ ?s {v} ?a BIND({expression} AS ?c) ?t {w} ?b FILTER(?c != ?b) }}"
    else:
        q = f"SELECT ?a ?b ?c WHERE {{ ?s {v} ?a . ?t {w} ?b BIND({expression} AS ?c) }}"
    root = compile_query(q, every_kind).root
    stack, python_binds = [root], 0
    while stack:
        op = stack.pop()
        python_binds += type(op).__name__ == "Extend"
        stack += [getattr(op, a) for a in ("input", "left", "right") if hasattr(op, a)]
    assert _native.uses_native(every_kind, q) and python_binds == 0, "the BIND runs inside the chain"
    steps = _native.total_steps(every_kind, q)
    _native.compare(every_kind, q, monkeypatch, every=max(1, steps // 12))


def test_a_bind_of_a_bound_variable_keeps_equal_rows_only(every_kind: TripleStore) -> None:
    """BIND to a variable the left side of a join binds (as a bind join's VALUES does)
    keeps a row only when the values agree."""
    q = (
        'SELECT ?a ?c WHERE { VALUES ?c { <http://example.org/a> "abc" } '
        "{ ?s <http://example.org/v> ?a BIND(?a AS ?c) } }"
    )
    plan = compile_query(q, every_kind)
    quantum = Quantum(None)
    plan.ctx.quantum = quantum
    rows, done = run(plan, quantum)
    assert done and _native.uses_native(every_kind, q)
    decoded = set(decode(plan, rows))
    assert decoded == {("http://example.org/a", "http://example.org/a"), ('"abc"', '"abc"')}, decoded
