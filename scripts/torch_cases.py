"""The differential suite's reach: how many cases (examples x ops) it compared with PyTorch, op by op.

    .tools/bin/hatch -e torch run python scripts/torch_cases.py --out docs/outputs/torch_cases.txt

Runs `tests-e2e/test_torch_differential.py` (it needs the `torch` environment, which holds PyTorch) and
reads the count the suite keeps for its closing line. The table says which ops the suite reaches and how
often; the header says how the run ended, since a test that fails stops at its first failing example and
so counts fewer cases than a passing run.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
import stamp
from arguments import output_file

ROOT = Path(__file__).resolve().parent.parent
SUITE = "tests-e2e/test_torch_differential.py"


class CaseCount:
    """A pytest plugin: the suite module's own Counter of cases, and how many tests passed and failed."""

    def __init__(self) -> None:
        self.module: ModuleType | None = None
        self.outcomes: Counter[str] = Counter()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        modules = {item.module for item in items if isinstance(item, pytest.Function) and item.module is not None}
        self.module = next(iter(modules), None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.failed:
            self.outcomes[report.outcome] += 1

    def cases(self) -> Counter[str]:
        return Counter(getattr(self.module, "CASES", {}))


def table(cases: Counter[str]) -> str:
    rows = ["| op | cases |", "| --- | ---: |", *(f"| {op} | {n} |" for op, n in sorted(cases.items()))]
    totals = [f"| ops compared | {len(cases)} |", f"| total | {sum(cases.values())} |"]
    return "\n".join([*rows, *totals]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=output_file, help="also write the table, stamped, to this file")
    args = parser.parse_args()
    count = CaseCount()
    code = pytest.main([str(ROOT / SUITE), "-q", "-p", "no:cacheprovider"], plugins=[count])
    cases = count.cases()
    outcome = ", ".join(f"{n} {what}" for what, n in sorted(count.outcomes.items()))
    text = f"{sum(cases.values())} cases (examples x ops) over {len(cases)} ops; tests: {outcome}\n\n{table(cases)}"
    stamp.emit(text, args.out, ["packages", SUITE, __file__])
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
