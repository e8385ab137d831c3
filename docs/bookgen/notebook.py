"""The lab notebook (docs/notes.md) and the chapters' pitfalls, linked both ways.

Each entry is `## N. title` and gets the anchor `entry-N`, so a chapter links it as
`[notebook entry N](../notes.md#entry-N)`. Each entry has a `**Chapter.**` line that links the chapter (or
appendix) whose pitfalls tell it, and names its test or script (the build links those into Appendix D).
The checks here fail the build when an entry lacks either link, when a chapter an entry names does not link
back to it, or when a page mentions a notebook entry without linking it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ENTRY = re.compile(r"^## (\d+)\. (.+?)\s*$", re.MULTILINE)
_CHAPTER = re.compile(r"\*\*Chapters?\.\*\*(.*)")
_PAGE_LINK = re.compile(r"\]\(((?:book|appendix)/[\w.-]+\.md)(?:#[\w-]*)?\)")
_BACK_LINK = re.compile(r"notes\.md#entry-(\d+)")
_UNLINKED = re.compile(r"(?<!\[)notebook entr(?:y|ies) \d+")
_APPENDIX_D = re.compile(r"\]\(appendix/d\d-[\w-]+\.md#")


def add_entry_anchors(markdown: str) -> str:
    return ENTRY.sub(lambda m: f"## {m[1]}. {m[2]} {{ #entry-{m[1]} }}", markdown)


def entries(markdown: str) -> dict[int, str]:
    """The text of each entry, by number."""
    found = list(ENTRY.finditer(markdown))
    ends = [m.start() for m in found[1:]] + [len(markdown)] if found else []
    return {int(m[1]): markdown[m.start() : end] for m, end in zip(found, ends, strict=True)}


def chapters_of(entry: str) -> list[str]:
    """The pages an entry's Chapter line links (book/xx.md or appendix/xx.md)."""
    line = _CHAPTER.search(entry)
    return _PAGE_LINK.findall(line[1]) if line else []


def check_entries(linked_notes: str) -> list[str]:
    """Problems with the entries of notes.md, after its test references were linked into Appendix D."""
    problems = []
    for number, text in entries(linked_notes).items():
        if not chapters_of(text):
            problems.append(
                f"notes.md entry {number} links no chapter: add a line "
                f"'- **Chapter.** [N. title](book/NN-name.md#pitfalls)' naming the chapter whose pitfalls tell it"
            )
        if not _APPENDIX_D.search(text):
            problems.append(f"notes.md entry {number} names no test or script (as `test_file.py::test_name`)")
    return problems


def check_back_links(notes: str, pages: Iterable[tuple[str, str]]) -> list[str]:
    """Each chapter an entry names links that entry back; every mention of an entry is a link."""
    text = dict(pages)
    problems = []
    for number, entry in entries(notes).items():
        for page in chapters_of(entry):
            if page in text and str(number) not in _BACK_LINK.findall(text[page]):
                problems.append(f"{page} does not link notebook entry {number}, whose Chapter line names it")
    for page, markdown in text.items():
        problems += [f"{page}: '{m[0]}' is not a link to the notebook" for m in _UNLINKED.finditer(markdown)]
    return problems
