"""mkdocs hooks: make the generated parts of the book, and check that the book still matches the code.

Before the build: the vendored scripts must match their recorded checksums, the stamped outputs are compared
with the code they measure, and the listings run (docs/bookgen/listings.py). A stale output does not stop the
build (code changes more often than benchmarks can be re-run on a quiet machine): each page that shows one
gets a visible warning naming the commit it measured; `UOPC_DOCS_STALE=error` makes it a build failure instead,
for a release. For each page: notebook entries get anchors, Appendix D pages receive the source,
`{{ out ... }}` figures are read from the outputs, references to tests and scripts become links, and code
included by name is put in. After the build: the notebook and the chapters link each other, and the glossary
lists every definition. A problem is logged as a warning, which `mkdocs build --strict` (CI)
turns into a failure.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from bookgen import glossary, includes, notebook, outputs, source, vendor
from bookgen.listings import run_listings

log = logging.getLogger("mkdocs.plugins.book")
PAGES: dict[str, str] = {}  # each page's prose after this hook's changes (no stale warning, no code), by path
STALE: dict[str, str] = {}  # output file name -> why its numbers may not describe this checkout's code


def on_pre_build(config: Any) -> None:
    PAGES.clear()
    for problem in vendor.check_vendored() + includes.markers_in_source():
        log.warning(problem)
    if outputs.has_history():
        STALE.clear()
        STALE.update(outputs.stale_outputs())
        for name, reason in STALE.items():
            message = f"docs/outputs/{name} is stale: {reason}. {outputs.REFRESH}"
            log.warning(message) if os.environ.get("UOPC_DOCS_STALE") == "error" else log.info(message)
    else:
        log.info("not a git checkout with its history: the stamps of docs/outputs/ are not checked against the code")
    run_listings()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    path = page.file.src_uri
    if path == "notes.md":
        markdown = notebook.add_entry_anchors(markdown)
    markdown = source.expand_source_pages(markdown)
    stale = outputs.stale_shown(markdown, STALE)
    if path == "index.md" or path.startswith("book/"):
        for problem in outputs.typed_figures(markdown):
            log.warning(f"{path}: {problem}")
    try:
        markdown = outputs.insert_figures(markdown)
    except ValueError as e:
        log.warning(f"{path}: {e}")
    markdown, problems = source.link_references(markdown, path)
    for problem in problems:
        log.warning(f"{path}: {problem}")
    PAGES[path] = markdown
    # last, what is no prose to check: the stale warnings quote commit subjects (which may say "notebook
    # entries 73-74", notebook 116), and the code included by name
    markdown = outputs.flag_stale(markdown, stale)
    markdown, problems = includes.expand(markdown)
    for problem in problems:
        log.warning(f"{path}: {problem}")
    return markdown


def on_post_build(config: Any) -> None:
    notes = PAGES.get("notes.md", "")
    problems = notebook.check_entries(notes) + notebook.check_back_links(notes, PAGES.items())
    problems += glossary.check_glossary(PAGES.items())
    for problem in problems:
        log.warning(problem)
