"""The measurements in docs/outputs/: their stamps must be newer than the code they measure, and the prose
quotes them through `{{ out FILE "row" "column" }}` instead of copying numbers by hand.

The scripts in scripts/ write every output with a stamp (scripts/stamp.py). A figure in a page is written
`{{ out bench_gemm.txt "upcast 8x8 + thread" "GFLOP/s" }}`: the cell of that row (matched on the table's first
column) and column (the last one when omitted) of the markdown table in that output file.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
OUTPUTS = DOCS / "outputs"
sys.path.insert(0, str(DOCS.parent / "scripts"))  # scripts/ is a folder of scripts, not a package
import stamp  # noqa: E402

FIGURE = re.compile(r"\{\{\s*out\s+(.+?)\s*\}\}")
# a measured time or speed typed into the prose, where a `{{ out ... }}` reference belongs
TYPED = re.compile(r"(?<![\w.])\d[\d,.]*\s?(?:ms|GFLOP/s|img/s)\b")


def has_history() -> bool:
    """Whether this is a git checkout with its whole history (a shallow clone cannot date the code)."""
    done = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=DOCS, capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and done.stdout.strip() == "false"


REFRESH = "Run the script that writes it again (the command is in the chapter that shows it) and commit the new file."


def stale_outputs() -> dict[str, str]:
    """Why, for each output file whose numbers may not describe the code in this checkout."""
    found = {}
    for path in sorted(OUTPUTS.iterdir()):
        reason = stamp.stale_reason(path)
        if reason is not None:
            found[path.name] = reason
    return found


def stale_shown(markdown: str, stale: dict[str, str]) -> dict[str, str]:
    """The stale outputs a page shows or quotes (read before its figures replace the quotes), with why."""
    quoted = {n for n in stale if re.search(rf"out\s+{re.escape(n)}", markdown)}
    return {n: why for n, why in stale.items() if f"outputs/{n}" in markdown or n in quoted}


def flag_stale(markdown: str, shown: dict[str, str]) -> str:
    """The page with a warning on top for each stale output it shows (name -> why), so a reader sees it."""
    notes = [
        f'!!! warning "Measured on older code: {name}"\n    {why}. The figures from this file may not '
        f"describe the code as it is now.\n"
        for name, why in shown.items()
    ]
    if not notes:
        return markdown
    title, _, rest = markdown.partition("\n")  # after the page's heading
    return "\n".join([title, "", *notes, rest]) if title.startswith("# ") else "\n".join([*notes, markdown])


def table(path: Path) -> dict[str, dict[str, str]]:
    """The markdown tables in an output file, as {first cell: {column name: cell}}; each table is read under
    its own header, and a row name that an earlier table has already is not looked up in a later one."""
    rows: dict[str, dict[str, str]] = {}
    for block in re.split(r"\n(?!\|)[^\n]*", path.read_text()):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        if len(lines) < 2:
            continue
        header = [cell.strip() for cell in lines[0].strip("|").split("|")]
        for line in lines[2:]:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows.setdefault(cells[0], dict(zip(header, cells, strict=True)))
    if not rows:
        raise ValueError(f"{path.name} holds no markdown table")
    return rows


def figure(reference: str) -> str:
    """The value a `{{ out ... }}` reference names; a ValueError that says what is missing otherwise."""
    name, row, *column = shlex.split(reference)
    path = OUTPUTS / name
    if not path.is_file():
        raise ValueError(f"{{{{ out {reference} }}}}: there is no docs/outputs/{name}")
    found = table(path)
    if row not in found:
        raise ValueError(f"{{{{ out {reference} }}}}: {name} has no row {row!r}; its rows: {list(found)}")
    cells = found[row]
    key = column[0] if column else list(cells)[-1]
    if key not in cells:
        raise ValueError(f"{{{{ out {reference} }}}}: {name} has no column {key!r}; its columns: {list(cells)}")
    return cells[key]


def insert_figures(markdown: str) -> str:
    return FIGURE.sub(lambda m: figure(m[1]), markdown)


def typed_figures(markdown: str) -> list[str]:
    """Measurements typed by hand in a page's own text: not in code, not in an indented block (the pitfalls
    tell history, with the numbers of their time), not in a `{{ out ... }}` reference."""
    found, fenced = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and not line.startswith("    "):
            text = re.sub(r"`[^`]*`", "", FIGURE.sub("", line))
            advice = "is typed by hand; quote the stamped output with {{ out ... }}"
            found += [f"'{m[0]}' {advice}" for m in TYPED.finditer(text)]
    return found
