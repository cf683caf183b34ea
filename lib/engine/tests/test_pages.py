"""The results path: pages end with the quantum, a byte budget or a row cap;
results written from ids on the native store (JSON, TSV, CSV, XML) are byte
for byte what the Python writers make from the decoded rows."""

from __future__ import annotations

import json

import pytest

from quanta.engine.execute import execute
from quanta.engine.storage import TripleStore, open_store
from quanta.sparql.errors import InvalidRequest
from quanta.sparql.results import FORMATS, Unrepresentable, json_bindings_text, rows_text
from quanta.testkit.data import write_hdt

EX = "http://example.org/"
ODD = [
    '"plain"',
    '"tab\\there"',
    '"quote \\" and backslash \\\\"',
    '"line\\nbreak\\r"',
    '"caf\\u00E9 \\u00FC"@de',
    '"emoji \\U0001F600"',
    '"ctrl \\u0001 del \\u007F"',
    '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    '"s"^^<http://www.w3.org/2001/XMLSchema#string>',
    '"x"@en-gb',
    "_:blank",
    "<http://example.org/ü/path>",
]


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory: pytest.TempPathFactory) -> TripleStore:
    lines = [f"<{EX}s{i}> <{EX}p> {term} ." for i, term in enumerate(ODD)]
    lines += [f"_:blank <{EX}p> <{EX}s0> ."]
    return open_store(str(write_hdt("\n".join(lines) + "\n", tmp_path_factory.mktemp("odd"))), "odd")


WITHOUT_CONTROLS = f"SELECT * WHERE {{ ?s <{EX}p> ?o FILTER(?s != <{EX}s6>) }}"  # no U+0001 (ODD[6])
QUERIES = [
    f"SELECT * WHERE {{ ?s <{EX}p> ?o }}",
    f"SELECT ?o ?s WHERE {{ ?s <{EX}p> ?o }}",
    f'SELECT * WHERE {{ ?s <{EX}p> ?o BIND(CONCAT(STR(?o), "é\\"") AS ?c) BIND(LANG(?o) AS ?l) }}',
    f"SELECT * WHERE {{ VALUES ?x {{ <{EX}nowhere> UNDEF }} ?s <{EX}p> ?o }}",
    WITHOUT_CONTROLS,
]


@pytest.mark.parametrize("query", QUERIES)
def test_bindings_json_is_the_python_writer(odd_store: TripleStore, query: str) -> None:
    page = execute(odd_store, query=query, quantum_seconds=None)
    fast = page.bindings_json()  # before the rows are decoded: from ids when native
    assert fast == json_bindings_text(page.head, page.rows).encode()
    assert len(json.loads(fast)) == page.count == len(page.rows)


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("query", QUERIES)
def test_each_format_is_the_python_writer(odd_store: TripleStore, query: str, fmt: str) -> None:
    page = execute(odd_store, query=query, quantum_seconds=None)
    if fmt == "xml" and query != WITHOUT_CONTROLS:  # XML 1.0 cannot carry U+0001: both writers refuse alike
        with pytest.raises(Unrepresentable) as fast_refusal:
            page.text(fmt)
        with pytest.raises(Unrepresentable) as refusal:
            rows_text(fmt, page.head, page.rows)
        assert str(fast_refusal.value) == str(refusal.value) and "U+0001" in str(refusal.value)
        return
    fast = page.text(fmt)  # before the rows are decoded: from ids when native
    assert fast == rows_text(fmt, page.head, page.rows).encode()
    assert fast.decode().count("<result>" if fmt == "xml" else "\n") >= page.count or fmt == "json"


def test_columns_choose_and_order_the_head(odd_store: TripleStore) -> None:
    query = f"SELECT * WHERE {{ ?s <{EX}p> ?o BIND(STR(?o) AS ?c) }}"
    whole = execute(odd_store, query=query, quantum_seconds=None)
    page = execute(odd_store, query=query, quantum_seconds=None, columns=["o", "s"])
    assert page.head == ["o", "s"]
    at = [whole.head.index(v) for v in page.head]
    assert page.rows == [tuple(row[i] for i in at) for row in whole.rows]
    assert page.text("tsv") == rows_text("tsv", ["o", "s"], page.rows).encode()
    with pytest.raises(InvalidRequest):
        execute(odd_store, query=query, quantum_seconds=None, columns=["o", "nowhere"])


def test_bindings_json_on_watdiv(watdiv_store: TripleStore) -> None:
    query = "SELECT * WHERE { ?s ?p ?o }"
    page = execute(watdiv_store, query=query, quantum_seconds=None, max_results=5000)
    assert page.count == 5000
    assert page.bindings_json() == json_bindings_text(page.head, page.rows).encode()
    assert page.text("tsv") == rows_text("tsv", page.head, page.rows).encode()


def test_a_byte_budget_ends_the_page(watdiv_store: TripleStore) -> None:
    """About max_bytes of JSON a page (measured on its own rows), not a fixed row count."""
    query = "SELECT * WHERE { ?s <http://db.uwaterloo.ca/~galuc/wsdbm/friendOf> ?f . ?f ?p ?o }"
    budget = 200_000
    total, pages, saved = 0, 0, None
    while True:
        if saved is None:
            page = execute(watdiv_store, query=query, quantum_seconds=None, max_bytes=budget)
        else:
            page = execute(watdiv_store, saved=saved, quantum_seconds=None, max_bytes=budget)
        size = len(page.bindings_json())
        total += page.count
        pages += 1
        if page.next is None:
            break
        assert 0.8 * budget < size < 1.2 * budget, size
        saved = page.next
        if pages >= 4:
            break
    assert pages == 4 and total > 2000


def test_the_row_cap_still_applies(watdiv_store: TripleStore) -> None:
    page = execute(watdiv_store, query="SELECT * WHERE { ?s ?p ?o }", quantum_seconds=None, max_results=7)
    assert page.count == 7 and page.next is not None


# -- a page is bounded in bytes from its first row --

LIKES = "<http://db.uwaterloo.ca/~galuc/wsdbm/likes>"
BIG = 50_000  # characters of the computed literal of a big row: more than BUDGET by itself
BUDGET = 20_000


def _pages(store: TripleStore, query: str, max_bytes: int) -> list[list[tuple[str | None, ...]]]:
    """Every page's rows, each page resumed from the previous one's saved plan."""
    pages: list[list[tuple[str | None, ...]]] = []
    page = execute(store, query=query, quantum_seconds=None, max_bytes=max_bytes)
    while True:
        pages.append(list(page.rows))
        if page.next is None:
            return pages
        page = execute(store, saved=page.next, quantum_seconds=None, max_bytes=max_bytes)


def _big(condition: str = "true") -> str:
    """Rows of likes, ?big a literal of BIG characters where `condition` holds (else short)."""
    text = "a" * BIG
    return (
        f'SELECT ?s ?o ?big WHERE {{ ?s {LIKES} ?o BIND(IF({condition}, CONCAT(STR(?s), "{text}"), "x") AS ?big) }}'
        " LIMIT 40"
    )


def test_one_huge_row_ends_its_page(watdiv_store: TripleStore) -> None:
    """Each row is past the budget by itself: a page of one row (it was 16, the rows
    taken before the first measure), and the pages resumed one after another are
    the answer of one unbounded page (Resume(Suspend(P)) = P)."""
    query = _big()
    pages = _pages(watdiv_store, query, BUDGET)
    whole = execute(watdiv_store, query=query, quantum_seconds=None).rows
    assert len(whole) == 40
    assert [len(p) for p in pages[:-1]] == [1] * 40  # the last page: the end, with no row
    assert [row for page in pages for row in page] == list(whole)


def test_a_huge_row_among_small_ones_ends_its_page_at_the_next_measure(watdiv_store: TripleStore) -> None:
    """Measures at rows 1, 2, 4, 8...: rows 1 to 4 are all measured, so a huge third row ends its
    page at row 4 at the latest; the pages after it take many small rows again."""
    s, o, _ = execute(watdiv_store, query=_big(), quantum_seconds=None).rows[2]
    query = _big(f"?s = <{s}> && ?o = <{o}>")  # IRIs (dictionary syntax: bare)
    pages = _pages(watdiv_store, query, BUDGET)
    whole = execute(watdiv_store, query=query, quantum_seconds=None).rows
    assert [i for i, row in enumerate(whole) if row[2] is not None and len(row[2]) > BIG] == [2]
    assert 1 <= len(pages[0]) <= 4, [len(p) for p in pages]
    assert any(row[2] is not None and len(row[2]) > BIG for row in pages[0])
    assert len(pages[1]) > 4, "small rows fill the next page"
    assert [row for page in pages for row in page] == list(whole)


def test_pages_of_small_rows_still_reach_about_the_budget(watdiv_store: TripleStore) -> None:
    """Measuring from row 1 does not make pages of small rows small."""
    query = f"SELECT ?s ?o WHERE {{ ?s {LIKES} ?o }}"
    pages = _pages(watdiv_store, query, BUDGET)
    sizes = [len(rows_text("json", ["s", "o"], page)) for page in pages[:-1]]
    assert all(0.7 * BUDGET < size < 1.3 * BUDGET for size in sizes), sizes
    whole = execute(watdiv_store, query=query, quantum_seconds=None).rows
    assert [row for page in pages for row in page] == list(whole)
