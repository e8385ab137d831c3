"""The repository's own promises: CI runs what the README says, and every `hatch run` a page tells readers
to type exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = re.compile(r"^python3 -m venv \.tools && .*hatch run ci:all$", re.MULTILINE)


def test_ci_runs_the_readme_test_command() -> None:
    readme = COMMAND.findall((ROOT / "README.md").read_text())
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert len(readme) == 1, f"the README should give one test command, found {readme}"
    assert ci_lines[-1] == readme[0], f".ci/run ends with {ci_lines[-1]!r}, the README's command is {readme[0]!r}"


def hatch_scripts() -> set[str]:
    """Every name `hatch run` accepts here: default scripts bare, other environments' as env:script."""
    config = tomllib.loads((ROOT / "hatch.toml").read_text())
    names = set()
    for env, settings in config["envs"].items():
        for script in settings.get("scripts", {}):
            names.add(script if env == "default" else f"{env}:{script}")
    return names


def test_every_hatch_run_in_the_readme_and_the_book_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    known = hatch_scripts()
    unknown = [
        f"{page.relative_to(ROOT)}: hatch run {name}"
        for page in pages
        for name in re.findall(r"hatch run ([\w:-]+)", page.read_text())
        if name not in known and name != "python"  # `hatch run python ...` runs a command, not a script
    ]
    assert not unknown, f"commands that hatch.toml does not define: {unknown}"
