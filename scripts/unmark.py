"""Take the book's snippets markers out of the source: each marked section becomes an include by name.

For every `# --8<-- [start:NAME]` ... `# --8<-- [end:NAME]` section in the source (docs/bookgen/includes.py
says which folders), finds the definitions the section holds: the first one that starts inside it and the
last one that ends inside it (`A`, or the range `A..B`). Each page's `--8<-- "FILE:NAME"` becomes
`--8<-- "@MODULE:A..B"`, and the markers leave the file. It prints, for each section, the include it wrote and
whether the book shows the same code; where not, the difference. A section no definition covers is
reported and its file left as it is (exit status 1). Running it again on converted code changes nothing.

A branch written while the source still had markers: run this on the branch (with this script and
docs/bookgen/includes.py from main) before merging it, so that both sides have lost the same marker lines
and only real changes conflict; or merge, keep the marker lines in each conflict, and run it after.

    python scripts/unmark.py              # convert, and report
    python scripts/unmark.py --dry-run    # report only
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs"))
from bookgen import includes

ROOT = includes.ROOT
START_END = includes.MARKER
SECTION_INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<-- "(?P<path>[^"@:]+\.py):(?P<section>[\w-]+)"[ \t]*$', re.M)


@dataclass(frozen=True)
class Section:
    path: str  # from the root
    name: str
    shown: str  # the code snippets showed for it
    names: str  # the include by name: A or A..B; empty when no definition covers it
    code: str  # the code that include shows


def marked_sections(lines: list[str], path: str) -> dict[str, tuple[int, int]]:
    """Each section's first and last line inside its markers (counted from 1), by name."""
    opened: dict[str, int] = {}
    found: dict[str, tuple[int, int]] = {}
    for number, line in enumerate(lines, 1):
        if m := START_END.match(line):
            if m["kind"] == "start":
                opened[m["name"]] = number + 1
            elif m["name"] in opened:
                found[m["name"]] = (opened.pop(m["name"]), number - 1)
            else:
                raise SystemExit(f"{path}:{number}: [end:{m['name']}] without its start")
    if opened:
        raise SystemExit(f"{path}: sections {sorted(opened)} are never ended")
    return found


def covering(spans: dict[str, list[includes.Span]], first: int, last: int) -> str:
    """`A` or `A..B` for the definitions from the first that starts at or after line `first` to the last that
    ends at or before `last`; empty when there is none."""
    unique = {name: found[0] for name, found in spans.items() if len(found) == 1}
    starts = [(s, -e, name) for name, (s, e) in unique.items() if first <= s <= last]
    if not starts:
        return ""
    start, _, a = min(starts)
    ends = [(e, -s, name) for name, (s, e) in unique.items() if start <= s and e <= last]
    if not ends:
        return ""
    end, _, b = max(ends)
    return a if unique[a][1] == end else f"{a}..{b}"


def where(path: str) -> str:
    """How an include names a file: its module for the packages' source, else its path."""
    if m := re.fullmatch(r"packages/[^/]+/src/(.+)\.py", path):
        return m[1].removesuffix("/__init__").replace("/", ".")
    return path


def unmarked(lines: list[str]) -> tuple[list[str], dict[int, int]]:
    """The lines without markers, and each kept line's new number (both counted from 1). The blank lines on
    either side of a marker close up to the longer of the two runs, as a formatter leaves them."""
    out: list[str] = []
    renumber: dict[int, int] = {}
    for number, line in enumerate(lines, 1):
        if START_END.match(line):
            before = len(list(itertools.takewhile(lambda x: not x.strip(), reversed(out))))
            after = len(list(itertools.takewhile(lambda x: not x.strip(), lines[number:])))
            del out[len(out) - min(before, after) :]
        else:
            out.append(line)
            renumber[number] = len(out)
    return out, renumber


def convert(path: str, text: str) -> tuple[str, list[Section]]:
    """The file's text without markers, and what each of its sections becomes."""
    lines = text.split("\n")
    bounds = marked_sections(lines, path)
    kept, renumber = unmarked(lines)
    new = "\n".join(kept).rstrip("\n") + "\n"  # a marker at the end leaves no blank line after the code
    spans = includes.definitions(new)
    sections = []
    for name, (first, last) in bounds.items():
        inside = [n for n in range(first, last + 1) if not START_END.match(lines[n - 1])]
        shown = textwrap.dedent("\n".join(lines[n - 1] for n in inside)).strip("\n")
        filled = [renumber[n] for n in inside if lines[n - 1].strip()]
        names = covering(spans, _comments_above(kept, filled[0]), filled[-1]) if filled else ""
        code = includes.code(new, names, path).strip("\n") if names else ""
        sections.append(Section(path, name, shown, names, code))
    return new, sections


def _comments_above(lines: list[str], first: int) -> int:
    """The first line of the comment block that runs into line `first` (counted from 1)."""
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


def report(section: Section) -> str:
    head = f"{section.path}:{section.name}"
    if not section.names:
        return f"{head}: NOT CONVERTED, no definition starts and ends inside it"
    include = f"@{where(section.path)}:{section.names}"
    if section.code == section.shown:
        return f"{head} -> {include} (same code)"
    diff = difflib.unified_diff(section.shown.split("\n"), section.code.split("\n"), "before", "after", lineterm="")
    return f"{head} -> {include} (CHANGED)\n" + "\n".join("    " + line for line in diff)


def rewrite_page(text: str, page: str, converted: dict[tuple[str, str], str], kept: set[str]) -> tuple[str, list[str]]:
    """The page with its section includes pointed at the names, and the includes of sections that do not
    exist (none is reported for the files in `kept`, whose markers stay)."""
    missing = []

    def by_name(m: re.Match[str]) -> str:
        names = converted.get((m["path"], m["section"]))
        if names is not None:
            return f'{m["indent"]}--8<-- "@{where(m["path"])}:{names}"'
        if m["path"] not in kept and (ROOT / m["path"]).is_file() and not m["path"].startswith("docs/"):
            missing.append(f"{page}: {m[0].strip()} names no marked section")
        return m[0]

    return SECTION_INCLUDE.sub(by_name, text), missing


def convert_sources(write: bool) -> tuple[dict[tuple[str, str], str], set[str]]:
    """Report every marked section and, with `write`, take the markers out of each file whose sections all
    convert. Returns the include by name for each (file, section), and the files left as they are."""
    converted: dict[tuple[str, str], str] = {}
    kept: set[str] = set()
    for pattern in includes.SOURCE_GLOBS:
        for file in sorted(ROOT.glob(pattern)):
            path, text = file.relative_to(ROOT).as_posix(), file.read_text()
            if not any(START_END.match(line) for line in text.split("\n")):
                continue
            unmarked, sections = convert(path, text)
            print("\n".join(report(s) for s in sections))
            if any(not s.names for s in sections):
                kept.add(path)
                continue
            converted |= {(path, s.name): s.names for s in sections}
            if write:
                file.write_text(unmarked)
    return converted, kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    args = parser.parse_args()
    converted, kept = convert_sources(write=not args.dry_run)
    missing = []
    for page in [] if args.dry_run else sorted((ROOT / "docs").rglob("*.md")):
        text, problems = rewrite_page(page.read_text(), page.relative_to(ROOT).as_posix(), converted, kept)
        missing += problems
        if text != page.read_text():
            page.write_text(text)
    print("\n".join([*missing, f"{len(converted)} sections converted" + (", nothing written" if args.dry_run else "")]))
    return 1 if kept or missing else 0


if __name__ == "__main__":
    sys.exit(main())
