"""Appendix B: one program from the closed-program fuzzer, evaluated the three independent ways."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from uopc.ir import to_uir

ROOT = Path(__file__).resolve().parent.parent.parent


def load(path: str) -> ModuleType:
    """A test module by its path (tests-e2e is a folder of tests, not a package)."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


three_way = load("tests-e2e/test_three_way.py")
# --8<-- [start:run]
program = three_way.random_program(23)  # the test's generator, seeded: test id [23]
print(to_uir(program))
for path in (three_way.by_interpreter, three_way.by_rangeify_and_c, three_way.by_tensor):
    print(f"{path.__name__:18} {path(program).tolist()}")
# --8<-- [end:run]
