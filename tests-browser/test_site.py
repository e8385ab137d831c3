"""The built book, read in a real browser with the network cut off.

Every page of `site/` (run `hatch run docs:build` first) is opened once in headless Chromium, served from
127.0.0.1; any request to another host is refused and fails the test, and so does DNS for any other name.
A page fails on a console error or an uncaught exception, and on a mermaid diagram that did not become an
SVG, and on a search box that finds nothing for a term the book defines (one glossary term per page; on a
few pages, many): with the theme's mermaid loaded from a CDN, an offline page with a diagram threw inside
the theme's script, and search never got past "Initializing search".

The browser, and the flags that cut it off from the network, are conftest.py's.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, Request, Route
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"
# The theme draws each diagram into a closed shadow root; opening it lets the test look at the SVG.
OPEN_SHADOW_ROOTS = """
const attach = Element.prototype.attachShadow;
Element.prototype.attachShadow = function (init) { return attach.call(this, { ...init, mode: "open" }); };
"""
PAGES = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")) if SITE.is_dir() else []
SEARCH_PAGES = ["index.html", "book/02-rewriting/index.html", "notes/index.html", "appendix/c-glossary/index.html"]
GLOSSARY = ROOT / "docs" / "appendix" / "c-glossary.md"


def glossary_terms() -> list[str]:
    """The glossary's terms as a reader would type them: without their parenthesized qualifiers."""
    terms = re.findall(r"^\*\*(.+?)\*\*$", GLOSSARY.read_text(), re.MULTILINE)
    return [re.sub(r"\s*\(.*\)$", "", t).strip("`") for t in terms]


# the words the book uses most: a search index whose code tokens break lunr's wildcard expansion answered
# nothing for "tensor" (notes.md entry 112)
COMMON_WORDS = ["tensor", "kernel", "Tensor.sum", "2**40"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def origin() -> Iterator[str]:
    if not PAGES:
        pytest.fail(f"{SITE} holds no pages: build the book first (hatch run docs:build)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=SITE))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def context(origin: str, chromium: BrowserContext) -> BrowserContext:
    chromium.add_init_script(OPEN_SHADOW_ROOTS)
    return chromium


class Visit:
    """One page opened with every console error, page error and refused request recorded."""

    def __init__(self, context: BrowserContext, origin: str, path: str) -> None:
        self.problems: list[str] = []
        self.page: Page = context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught exception: {e}"))
        self.page.route("**/*", lambda route, request: self._route(route, request, origin))
        self.page.goto(f"{origin}/{path}", wait_until="load")

    def _console(self, message: ConsoleMessage) -> None:
        # the search worker reports a crashed query as a warning, then shows "No matching documents"
        if message.type == "error" or "Invalid query" in message.text:
            self.problems.append(f"console {message.type}: {message.text}")

    def _route(self, route: Route, request: Request, origin: str) -> None:
        if request.url.startswith(origin) or request.url.startswith("data:"):
            route.continue_()
        else:
            self.problems.append(f"request to another host refused: {request.url}")
            route.abort()

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def visit(context: BrowserContext, origin: str) -> Iterator[functools.partial[Visit]]:
    opened: list[Visit] = []

    def open_page(path: str) -> Visit:
        opened.append(Visit(context, origin, path))
        return opened[-1]

    yield functools.partial(open_page)
    for v in opened:
        v.close()


def diagrams_drawn(page: Page, count: int) -> list[str]:
    """Wait for the theme to replace each mermaid block by a drawing; problems with any that it did not."""
    try:
        page.wait_for_function(f"document.querySelectorAll('div.mermaid').length >= {count}", timeout=20_000)
    except PlaywrightTimeoutError:
        drawn = page.locator("div.mermaid").count()
        return [f"{count - drawn} of {count} mermaid diagrams were not drawn within 20 s (shown as source)"]
    drawings = page.evaluate(
        """() => [...document.querySelectorAll('div.mermaid')].map(d => {
            const svg = d.shadowRoot && d.shadowRoot.querySelector('svg');
            return svg ? {height: svg.getBoundingClientRect().height, text: svg.textContent} : null;
        })"""
    )
    problems = []
    for i, drawing in enumerate(drawings):
        if drawing is None:
            problems.append(f"diagram {i + 1} has no SVG")
        elif drawing["height"] < 20 or "Syntax error" in drawing["text"]:
            problems.append(f"diagram {i + 1} did not draw: height {drawing['height']}, text {drawing['text'][:80]!r}")
    return problems


@pytest.mark.parametrize("path", PAGES or ["(no site)"])
def test_page_loads_offline_without_errors(visit: functools.partial[Visit], path: str) -> None:
    v = visit(path)
    blocks = (SITE / path).read_text().count('<pre class="mermaid">')
    problems = diagrams_drawn(v.page, blocks) if blocks else []
    if v.page.locator("input.md-search__input").count():  # the theme's 404 page has no search box
        terms = glossary_terms()
        term = terms[PAGES.index(path) % len(terms)]
        try:
            problems += [] if search(v.page, term) else [f"search found nothing for {term!r}"]
        except AssertionError as e:
            problems.append(str(e))
    assert not v.problems + problems, f"{path}:\n" + "\n".join(v.problems + problems)


def search(page: Page, term: str) -> int:
    """Type `term` into the search box and return how many results the theme lists; raise an AssertionError
    that quotes the search box's status line if the theme never answers."""
    box = page.locator("input.md-search__input")
    meta = "document.querySelector('.md-search-result__meta').textContent"
    # the theme reads the box on key events; it answers an empty box with "Type to start searching" once its
    # index is ready, so the answer read below is for this term and not for the one before it
    try:
        box.fill("")
        box.press("End")
        page.wait_for_function(f"/Type to start/.test({meta})", timeout=30_000)
        box.fill(term)
        box.press("End")
        page.wait_for_function(f"/matching document/i.test({meta})", timeout=10_000)
    except PlaywrightTimeoutError:
        raise AssertionError(f"search did not answer {term!r}: it says {page.evaluate(meta)!r}") from None
    return page.locator(".md-search-result__item").count()


@pytest.mark.parametrize("path", SEARCH_PAGES)
def test_search_answers_for_defined_terms(visit: functools.partial[Visit], path: str) -> None:
    v = visit(path)
    terms = glossary_terms()
    # every term on the first page; on the others, a few, enough to show search works there too
    chosen = COMMON_WORDS + terms if path == SEARCH_PAGES[0] else terms[SEARCH_PAGES.index(path) :: 25]
    try:
        unanswered = [t for t in chosen if search(v.page, t) == 0]
    except AssertionError as e:
        raise AssertionError("\n".join([f"{path}: {e}", *v.problems])) from None
    assert not unanswered, f"{path}: search found nothing for {unanswered}"
    assert not v.problems, f"{path}:\n" + "\n".join(v.problems)
