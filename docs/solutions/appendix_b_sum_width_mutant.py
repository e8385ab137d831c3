"""Exercise B.3: a mutant of your own, in the catalogue's form, and the test that kills it.

The mutant puts back notebook entry 44's bug: integer sums accumulate in their own width (an int32 sum
wraps), where numpy sums signed integers into int64 and unsigned ones into uint64. scripts/mutants.py runs
the mutants of its own catalogue; `first_failure` runs this one the same way: a shadow copy of the sources
with the mutant applied, first on PYTHONPATH, and pytest -x on the mutant's tests.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent


def load_harness() -> ModuleType:
    """scripts/mutants.py as a module (scripts/ is a folder of scripts: its own imports need it on the path)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = module
    spec.loader.exec_module(module)
    return module


mutants = load_harness()

SUM_IN_OWN_WIDTH = mutants.Mutant(
    "sum_in_own_width",
    mutants.TENSOR + "tensor.py",
    '    return dtypes.uint64 if dt.kind == "uint" else dtypes.int64\n',
    "    return dt\n",
    (mutants.TENSOR_T + "test_numerics.py", "-k", "integer_sums"),
    "integer sums accumulate in their own width: an int32 sum of large values wraps (numpy: int64)",
)


def first_failure(mutant: Any) -> str | None:
    """The first test that fails with `mutant` applied (None: it survives)."""
    with tempfile.TemporaryDirectory(prefix="uopc-mutant-") as tmp:
        shadow = mutants.make_shadow(Path(tmp, "src"), mutant)
        env = {**os.environ, "PYTHONPATH": str(shadow)}
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *mutant.tests]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    return failed[0] if failed else None
