"""The query page at `/` in a real browser: Debian's Chromium, headless, driven
by Playwright (scripts/browser.sh installs it; no browser is downloaded),
against a real service (Redis, two workers, the gateway) at a 2 ms quantum
with 40 rows a page, so queries span many quanta. Every test also checks
that the page asked nothing of another origin and broke no rule of its
Content-Security-Policy.

Screenshots go to $QUANTA_SCREENSHOTS when set (the docs' are made with
QUANTA_SCREENSHOTS=docs/img), else to the test's temporary folder.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from playwright.sync_api import Browser, Page, expect, sync_playwright

from quanta.common import keys

SERVICE_OPTIONS = {"quantum_ms": 2, "max_results": 40, "examples": True}
CHROMIUM = Path("/usr/bin/chromium")
# What a headless Chromium needs here: no sandbox (root), and none of its own calls home.
FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
LONG = "SELECT * WHERE { ?s ?p ?o . ?s ?q ?x }"  # millions of rows: tens of thousands of quanta
DISCONNECTED = 'quanta_sparql_queries_total{form="select",outcome="disconnected"}'


@dataclass
class Watched:
    """A page, and what it did that it should not: requests elsewhere, CSP violations, script errors."""

    page: Page
    origin: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def check_clean(self) -> None:
        elsewhere = [url for url in self.requests if _origin(url) != self.origin]
        assert elsewhere == [], "requests to another origin"
        assert self.page.evaluate("window.cspViolations") == [], "Content-Security-Policy violations"
        assert self.errors == [], "script errors"

    def editor(self, script: str) -> Any:
        """Run `script` with `cm`, the editor (CodeMirror keeps itself on its element)."""
        editor = "document.querySelector('.CodeMirror').CodeMirror"
        return self.page.evaluate(f"(() => {{ const cm = {editor}; {script} }})()")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: run scripts/browser.sh (make test does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def watched(browser: Browser, module_service) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    watched = Watched(page, module_service.url)
    page.add_init_script(
        "window.cspViolations = [];"
        "document.addEventListener('securitypolicyviolation', e => window.cspViolations.push(e.violatedDirective));"
    )
    page.on("request", lambda request: watched.requests.append(request.url))
    page.on("pageerror", lambda error: watched.errors.append(str(error)))
    yield watched
    context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("QUANTA_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def tasks_queued(redis_url: str) -> int:
    info: dict[str, Any] = redis.Redis.from_url(redis_url).xinfo_stream(keys.TASKS)
    return int(info["entries-added"])


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def open_page(watched: Watched) -> None:
    response = watched.page.goto(watched.origin + "/")
    assert response is not None and response.ok
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    expect(watched.page.locator("#example option").first).to_be_attached()


def figure(page: Page, name: str) -> int:
    return int((page.text_content(f"#{name}") or "0").replace(",", ""))


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    """Polled from here: the page's CSP forbids the eval that Playwright's wait_for_function needs."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_the_idle_page_offers_the_datasets_and_their_examples(watched: Watched, shots: Path) -> None:
    open_page(watched)
    page = watched.page
    assert page.eval_on_selector_all("#dataset option", "options => options.map(o => o.value)") == ["watdiv"]
    examples = page.eval_on_selector_all("#example option", "options => options.map(o => o.textContent)")
    assert len(examples) == 13 and examples[0].startswith("C3")
    assert "wsdbm:friendOf" in watched.editor("return cm.getValue();")
    assert page.text_content("#state") == "idle"
    page.screenshot(path=shots / "query-page-idle.png")
    watched.check_clean()


def test_a_query_shows_all_its_results(watched: Watched, module_service, shots: Path) -> None:
    open_page(watched)
    page = watched.page
    page.select_option("#example", label="ST-p06-08 (stress, 6 patterns), 4,912 results")
    before = tasks_queued(module_service.redis.url)
    page.click("#run")
    expect(page.locator("#state")).to_have_text("done", timeout=60_000)
    assert figure(page, "rows") == 4912
    assert figure(page, "quanta") == tasks_queued(module_service.redis.url) - before > 4912 // 40
    assert page.text_content("#worker") in ("e2e-worker-0", "e2e-worker-1")
    # the progress bar at its end: all done, no time left
    assert page.text_content("#percent") == "100%" and page.text_content("#left") == "0.0 s"
    assert page.eval_on_selector("#done", "bar => bar.value") == 1
    assert "4912 results" in (page.text_content(".yasr_response_chip") or "")
    assert page.locator(".yasr table.dataTable tbody tr").count() == 50  # a page of the table
    assert page.is_visible(".yasr_downloadIcon")
    page.screenshot(path=shots / "query-page-results.png")
    watched.check_clean()


def test_progress_moves_and_cancel_stops_the_query(watched: Watched, module_service, shots: Path) -> None:
    open_page(watched)
    page = watched.page
    page.evaluate(
        "window.seen = []; new MutationObserver(() => window.seen.push(document.querySelector('#quanta').textContent))"
        ".observe(document.querySelector('#quanta'), {childList: true, characterData: true, subtree: true})"
    )
    watched.editor(f"cm.setValue({LONG!r});")
    page.click("#run")
    wait_until(lambda: figure(page, "quanta") >= 150, "150 quanta")
    assert page.text_content("#state") == "running" and figure(page, "rows") > 0
    # the progress bar: a fraction done under 100%, and a time left (the stream's progress and eta_ms)
    done = page.eval_on_selector("#done", "bar => bar.value")
    percent = re.fullmatch(r"(\d+(?:\.\d)?)%", page.text_content("#percent") or "")
    assert 0 < done < 1 and percent is not None and float(percent.group(1)) < 100, (done, percent)
    left = page.text_content("#left") or ""
    assert re.fullmatch(r"[\d.]+ s|\d+ min \d+ s|\d+ h \d+ min", left), left
    expect(page.locator(".yasr table.dataTable tbody tr").first).to_be_visible()
    page.screenshot(path=shots / "query-page-running.png")
    disconnected = metric(module_service.url, DISCONNECTED)
    page.click("#cancel")
    expect(page.locator("#state")).to_have_text("cancelled")
    wait_until(lambda: metric(module_service.url, DISCONNECTED) > disconnected, "the gateway to see the client go")
    at_cancel = tasks_queued(module_service.redis.url)
    time.sleep(0.5)  # 250 quanta's time, were the query still running
    assert tasks_queued(module_service.redis.url) == at_cancel, "tasks were still queued for a cancelled query"
    seen = page.evaluate("window.seen")
    assert len(set(seen)) > 10, seen  # the counter moved quantum by quantum, not once at the end
    watched.check_clean()


def test_a_syntax_error_is_shown_and_marked_in_the_editor(watched: Watched, shots: Path) -> None:
    open_page(watched)
    page = watched.page
    watched.editor("cm.setValue('SELECT ?s\\nWHERE { ?s ?p }');")
    page.click("#run")
    expect(page.locator("#problem")).to_be_visible()
    assert page.text_content("#problem-title") == "The query does not parse"
    assert page.text_content("#problem-detail")
    marks = watched.editor("return cm.getAllMarks().filter(m => m.className === 'query-error').map(m => m.find());")
    assert [mark["from"]["line"] for mark in marks] == [1]  # the second line (CodeMirror counts from 0)
    assert page.is_visible(".query-error")
    page.screenshot(path=shots / "query-page-error.png")
    watched.editor("cm.setValue('SELECT * WHERE { ?s ?p ?o } LIMIT 3');")
    page.click("#run")
    expect(page.locator("#state")).to_have_text("done")
    assert page.is_hidden("#problem") and page.locator(".query-error").count() == 0
    assert figure(page, "rows") == 3
    watched.check_clean()
