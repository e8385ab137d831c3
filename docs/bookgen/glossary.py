"""Appendix C: every term the book defines, and each linked to its definition.

A chapter marks the place that defines a term with an anchor on the term itself, `*hash consing*{ #def-hash-consing }`;
the glossary's entry for it links there. The check fails the build when a definition has no glossary entry,
or a glossary entry links no definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

GLOSSARY = "appendix/c-glossary.md"
_DEFINED = re.compile(r"\{ ?#(def-[\w-]+) ?\}")
_LINKED = re.compile(r"\]\([\w./-]+\.md#(def-[\w-]+)\)")
TERM = re.compile(r"^\*\*(.+?)\*\*$", re.MULTILINE)


def check_glossary(pages: Iterable[tuple[str, str]]) -> list[str]:
    text = dict(pages)
    if GLOSSARY not in text:
        return [f"{GLOSSARY} is missing"]
    defined = {anchor: page for page, md in text.items() if page != GLOSSARY for anchor in _DEFINED.findall(md)}
    linked = set(_LINKED.findall(text[GLOSSARY]))
    problems = [
        f"{page} defines #{a}, which the glossary does not list" for a, page in defined.items() if a not in linked
    ]
    problems += [f"the glossary links #{a}, which no page defines" for a in sorted(linked - defined.keys())]
    return problems


def terms(glossary_markdown: str) -> list[str]:
    """The glossary's terms, in its order."""
    return TERM.findall(glossary_markdown)
