"""Appendix B: the mutant catalogue of scripts/mutants.py, with the test that killed each mutant in the last
full run, which `scripts/mutants.py --out docs/outputs/mutants.txt` wrote (stamped: the run is minutes long,
too long for every build of the book). Prints a markdown table, then the run's stamp.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
LAST_RUN = ROOT / "docs" / "outputs" / "mutants.txt"
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ is a folder of scripts, not a package
import mutants  # noqa: E402
import stamp  # noqa: E402


def killers() -> dict[str, str]:
    """Mutant name -> the test that killed it in the last run (its file and name, without the folders)."""
    found = {}
    for line in LAST_RUN.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and cells[0] not in ("mutant", "---"):
            found[cells[0]] = cells[2].replace("`", "").rsplit("/", 1)[-1]
    return found


killed_by = killers() if LAST_RUN.is_file() else {}
print("| mutant | package | what it breaks | killed by, in the last run |")
print("| --- | --- | --- | --- |")
for m in mutants.MUTANTS:
    verdict = killed_by.get(m.name)
    shown = f"`{verdict}`" if verdict and verdict not in ("SURVIVED", "no verdict") else verdict or "not in that run"
    print(f"| `{m.name}` | {m.module} | {m.breaks.replace('|', '&#124;')} | {shown} |")
run = stamp.read(LAST_RUN) if LAST_RUN.is_file() else None
if run is None:
    print(f"\n{len(mutants.MUTANTS)} mutants in the catalogue; no full run recorded yet.")
else:
    summary = next(line for line in LAST_RUN.read_text().splitlines()[1:] if line.strip())
    when = run.measured.strftime("%Y-%m-%d")
    print(f"\n{len(mutants.MUTANTS)} mutants in the catalogue. The last full run ({run.commit}, {when}): {summary}.")
