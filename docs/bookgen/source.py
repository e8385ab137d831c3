"""Appendix D (the full source, one page per package) and the links from the prose into it.

A page of Appendix D holds the line `<!-- source: FOLDER -->`; the build replaces it with every Python file
under that folder (and its pyproject.toml), each under a heading of its own path and collapsed. Any code span
in the book that names a test or a script (`test_uop.py::test_x`, `packages/uopc-lower/tests/test_opt.py`,
a bare `test_name`, `scripts/bench_gemm.py`) becomes a link to that file in Appendix D, and a span that names
a file or test that does not exist is reported, so a renamed test cannot leave a dead reference behind.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MARKER = re.compile(r"^<!-- source: (\S+) -->$", re.MULTILINE)
# where each folder's files are shown; the first matching prefix wins
PAGES = {
    "packages/uopc-ir/": "appendix/d1-uopc-ir.md",
    "packages/uopc-lower/": "appendix/d2-uopc-lower.md",
    "packages/uopc-backend-c/": "appendix/d3-uopc-backend-c.md",
    "packages/uopc-backend-cuda/": "appendix/d4-uopc-backend-cuda.md",
    "packages/uopc-tensor/": "appendix/d5-uopc-tensor.md",
    "tests-e2e/": "appendix/d6-tests-and-scripts.md",
    "tests-browser/": "appendix/d6-tests-and-scripts.md",
    "scripts/": "appendix/d6-tests-and-scripts.md",
}
# a code span naming a test file (with an optional ::test), a script, or a bare test function
_FILE_SPAN = re.compile(r"^(?:[\w./-]*/)?((?:test_\w+|scripts/\w+)\.py)(?:::([\w:]+)(?:\[[^\]]*\])?)?$")
_TEST_SPAN = re.compile(r"^(test_\w+)$")
_SPAN = re.compile(r"(?<![\[\w`])`([^`\n]+)`(?!\]\()")
_FENCE = re.compile(r"^\s*(```|~~~)")


def anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def page_of(path: str) -> str:
    return next(page for prefix, page in PAGES.items() if path.startswith(prefix))


def shown_files(folder: str) -> list[str]:
    """The files a folder's Appendix D section shows: pyproject.toml, then sources, then tests."""
    base = ROOT / folder
    files = sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts)
    files.sort(key=lambda p: ("tests" in p.relative_to(base).parts, p.as_posix()))
    project = [base / "pyproject.toml"] if (base / "pyproject.toml").exists() else []
    return [p.relative_to(ROOT).as_posix() for p in project + files]


def _file_block(path: str) -> str:
    text = (ROOT / path).read_text()
    lines = text.count("\n")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    language = "toml" if path.endswith(".toml") else "python"
    return (
        f"### `{path}` {{ #{anchor(path)} }}\n\n"
        f'??? abstract "{Path(path).name}: {lines} lines"\n'
        f'    {fence}{language} title="{path}"\n'
        f'    --8<-- "{path}"\n'
        f"    {fence}\n"
    )


def expand_source_pages(markdown: str) -> str:
    return MARKER.sub(lambda m: "\n".join(_file_block(p) for p in shown_files(m[1])), markdown)


@functools.cache
def _test_files() -> dict[str, str]:
    """Every test file and script, by the name the prose uses for it (test_uop.py, scripts/bench_gemm.py)."""
    found = {p.name: p for p in ROOT.glob("packages/*/tests/test_*.py")}
    found |= {p.name: p for p in ROOT.glob("tests-e2e/test_*.py")}
    found |= {p.name: p for p in ROOT.glob("tests-browser/test_*.py")}
    found |= {f"scripts/{p.name}": p for p in ROOT.glob("scripts/*.py")}
    return {name: p.relative_to(ROOT).as_posix() for name, p in found.items()}


@functools.cache
def _functions(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))


@functools.cache
def _test_index() -> dict[str, str]:
    """Each test function's file; a name defined in two files maps to neither."""
    index: dict[str, str] = {}
    for path in _test_files().values():
        for name in _functions(path):
            if name.startswith("test_"):
                index[name] = "" if name in index else path
    return index


def resolve(span: str) -> str | ValueError | None:
    """The file a code span refers to; None when it names no test or script; a ValueError when it names one
    that does not exist."""
    if found := _FILE_SPAN.match(span):
        name, test = found[1], found[2]
        written = span.partition("::")[0]  # a path given in full names its file, whose name may not be unique
        path = written if "/" in written and (ROOT / written).is_file() else _test_files().get(name)
        if path is None:
            return ValueError(f"`{span}` names {name}, which does not exist")
        if test is not None and test.split("::")[-1] not in _functions(path):
            return ValueError(f"`{span}`: {path} has no {test.split('::')[-1]}")
        if not any(path.startswith(folder) for folder in PAGES):
            return ValueError(f"`{span}` names {path}, which no page of Appendix D shows")
        return path
    if found := _TEST_SPAN.match(span):
        path = _test_index().get(found[1])
        if path is None:
            return ValueError(f"`{span}` is no test function in the test suites")
        return path or None  # defined twice: the prose must name the file
    return None


def link_references(markdown: str, page: str) -> tuple[str, list[str]]:
    """Code spans that name tests or scripts become links into Appendix D; returns the text and problems."""
    problems: list[str] = []
    here = posixpath.dirname(page)

    def link(m: re.Match[str]) -> str:
        target = resolve(m[1])
        if isinstance(target, ValueError):
            problems.append(str(target))
            return m[0]
        if target is None:
            return m[0]
        url = posixpath.relpath(page_of(target), here)
        return f"[{m[0]}]({url}#{anchor(target)})"

    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        skip = fenced or line.lstrip().startswith(("#", "!!!", "???"))
        out.append(line if skip else _SPAN.sub(link, line))
    return "\n".join(out), problems
