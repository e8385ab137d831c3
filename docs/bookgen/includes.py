"""Code in the book by qualified name, so that the source carries no markers for the book.

A page includes a definition with a snippets line whose path starts with `@`:

    --8<-- "@uopc.ir.uop:UOp.alu"                        a method of a class, in a module of packages/*/src
    --8<-- "@uopc.ir.symbolic:symbolic"                  a module-level name: a function, a class, a table
    --8<-- "@uopc.ir.uop:UOp..UOp.__new__"               every line from the first of one to the last of another
    --8<-- "@tests-e2e/test_three_way.py:test_paths"     a file that is no module: its path from the root

Before snippets reads the page, the build puts the definition's lines in place of that line, found in the
file's syntax tree: the comment lines directly above it (at its indentation, no blank line between, and no
`# ---- heading ----` of a group), its decorators and its body, dedented and then indented like the include
line. A name is a function, a class, a name assigned at the top level of a module or class body, or
`__doc__`, the docstring; `A.b` is b inside A. `A..B` runs from A's first line to B's last: a run of
neighbouring definitions, or a class's head down to one of its members. Formatter pragmas (`# fmt: off`,
`# fmt: on`) are left out. A name that is missing or defined twice in its
scope is a build error naming the page, the include and what was wrong.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<-- "@(?P<where>[^":]+):(?P<names>[^"]+)"[ \t]*$', re.MULTILINE)
PRAGMA = re.compile(r"^\s*# fmt: (off|on)\s*$")
HEADING = re.compile(r"^\s*# -{3,} .* -{3,}\s*$")  # `# ---- creation ----` heads a group of definitions
# a snippets section marker: what the source used to carry for the book, and must not carry again
MARKER = re.compile(r"^\s*# --8<-- \[(?P<kind>start|end):(?P<name>[\w-]+)\]\s*$")
# the code the book includes by name; docs/listings keep their markers: they are book material, not source
SOURCE_GLOBS = ("packages/*/src/**/*.py", "packages/*/tests/**/*.py", "scripts/*.py", "tests-*/**/*.py")
UNMARK = "python scripts/unmark.py"
Span = tuple[int, int]  # first and last line, counted from 1
DEFINITIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def source_file(where: str) -> Path:
    """The file an include names: a path from the root ending in .py, or a dotted module of packages/*/src."""
    if where.endswith(".py"):
        if (ROOT / where).is_file():
            return ROOT / where
        raise ValueError(f"there is no file {where}")
    inside = where.replace(".", "/")
    found = sorted(ROOT.glob(f"packages/*/src/{inside}.py")) + sorted(ROOT.glob(f"packages/*/src/{inside}/__init__.py"))
    if not found:
        raise ValueError(f"there is no module {where} in packages/*/src")
    return found[0]


def _names(node: ast.stmt) -> list[str]:
    """The names a statement defines, as an include can ask for them."""
    if isinstance(node, DEFINITIONS):
        return [node.name]
    if isinstance(node, ast.Assign):
        targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _first_line(node: ast.stmt, lines: list[str]) -> int:
    """Where a definition starts: its decorators, and the comment lines directly above them (a heading
    comment of a group of definitions is no part of the first)."""
    decorators: list[ast.expr] = node.decorator_list if isinstance(node, DEFINITIONS) else []
    first = min([node.lineno] + [d.lineno for d in decorators])
    indent = " " * node.col_offset
    while first > 1 and lines[first - 2].startswith(indent + "#") and not HEADING.match(lines[first - 2]):
        first -= 1
    return first


@functools.cache
def definitions(text: str) -> dict[str, list[Span]]:
    """Each qualified name a module's text defines, with the lines of each of its definitions."""
    lines = text.split("\n")
    found: dict[str, list[Span]] = {}
    todo: list[tuple[str, list[ast.stmt], bool]] = [("", ast.parse(text).body, False)]
    while todo:
        prefix, body, in_function = todo.pop()
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0].value, "value", None), str):
            found[prefix + "__doc__"] = [(body[0].lineno, body[0].end_lineno or body[0].lineno)]
        for node in body:
            if in_function and not isinstance(node, DEFINITIONS):
                continue  # a function's local variables are no part of what it defines
            for name in _names(node):
                found.setdefault(prefix + name, []).append((_first_line(node, lines), node.end_lineno or node.lineno))
            if isinstance(node, DEFINITIONS):
                todo.append((f"{prefix}{node.name}.", node.body, not isinstance(node, ast.ClassDef)))
    return found


def _span(text: str, name: str, where: str) -> Span:
    spans = definitions(text).get(name, [])
    if not spans:
        close = difflib.get_close_matches(name, definitions(text), n=3)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise ValueError(f"{where} defines no {name}{hint}")
    if len(spans) > 1:
        at = ", ".join(str(first) for first, _ in spans)
        raise ValueError(f"{name} is ambiguous: {where} defines it {len(spans)} times (lines {at}); use a range A..B")
    return spans[0]


def code(text: str, names: str, where: str) -> str:
    """The lines of `names` (`A` or `A..B`) in a module's text, dedented; `where` names the file in errors."""
    first, _, last = names.partition("..")
    start, end = _span(text, first, where)
    if last:
        after, end = _span(text, last, where)
        if after < start:
            raise ValueError(f"{last} comes before {first} in {where}")
    lines = text.split("\n")[start - 1 : end]
    return textwrap.dedent("\n".join(line for line in lines if not PRAGMA.match(line)))


def lookup(where: str, names: str) -> str:
    """The code an include `@where:names` shows."""
    return code(source_file(where).read_text(), names, where)


def expand(markdown: str) -> tuple[str, list[str]]:
    """The page with each `@` include replaced by its code; returns the text and what could not be found."""
    problems: list[str] = []

    def include(m: re.Match[str]) -> str:
        try:
            shown = lookup(m["where"], m["names"])
        except (ValueError, SyntaxError) as e:
            problems.append(f'`--8<-- "@{m["where"]}:{m["names"]}"`: {e}')
            return f"{m['indent']}# (not found: {m['where']}:{m['names']})"
        return "\n".join(m["indent"] + line if line else line for line in shown.split("\n"))

    return INCLUDE.sub(include, markdown), problems


def markers_in_source() -> list[str]:
    """Each snippets section marker left in the source: the book includes code by name now."""
    found = []
    for pattern in SOURCE_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            for number, line in enumerate(path.read_text().split("\n"), 1):
                if MARKER.match(line):
                    where = path.relative_to(ROOT).as_posix()
                    found.append(f"{where}:{number} has a snippets marker ({line.strip()}); run `{UNMARK}`")
    return found
