"""The book's exercise solutions (docs/solutions/*.py) are real code: each one is checked here.

docs/ is not a package, so each solution is loaded from its path.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from uopc.ir import Ops, UOp, param, range_, run, stack, substitute, to_python, to_uir

SOLUTIONS = Path(__file__).resolve().parent.parent / "docs" / "solutions"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"book_solution_{name}", SOLUTIONS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_solution_file_is_tested() -> None:
    tested = {
        "ch01_tree_size",
        "ch01_broadcast",
        "ch02_desugar_sub",
        "ch02_count_ops",
        "ch03_trunc_div",
        "ch03_in_bounds",
        "ch04_mean",
        "ch04_op_histogram",
    }
    assert {p.stem for p in SOLUTIONS.glob("*.py")} == tested


def test_ch01_tree_size_counts_every_use() -> None:
    tree_size = load("ch01_tree_size").tree_size
    x = param(0)
    assert tree_size(x) == 1
    assert tree_size(x + x) == 3  # two uses of x, one ADD
    y = x
    for _ in range(40):
        y = y + y
    assert len(y.toposort()) == 41
    assert tree_size(y) == 2**41 - 1


def test_ch01_broadcast_follows_numpy() -> None:
    broadcast_to = load("ch01_broadcast").broadcast_to
    row = stack(1.0, 2.0, 3.0)
    out = broadcast_to(row, (2, 3))
    assert out.shape == (2, 3)
    assert to_python(run(out)) == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    col = stack(stack(1.0), stack(2.0))  # shape (2, 1)
    assert to_python(run(broadcast_to(col, (2, 3)))) == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    assert broadcast_to(row, (3,)) is row
    with pytest.raises(ValueError, match="cannot broadcast"):
        broadcast_to(row, (2, 4))
    with pytest.raises(ValueError, match="lower rank"):
        broadcast_to(col, (3,))


def test_ch02_desugar_sub_removes_sub_and_keeps_values() -> None:
    desugar_sub = load("ch02_desugar_sub").desugar_sub
    a, b = param(0), param(1)
    out = desugar_sub((a - b) - (b - 3))
    assert all(u.op is not Ops.SUB for u in out.toposort())
    for x, y in [(5, 7), (-3, 2), (2**31 - 1, -1)]:
        values = {a: UOp.const(x), b: UOp.const(y)}
        assert run(substitute(out, values)) is run(substitute((a - b) - (b - 3), values))
    f = stack(1.5, -0.0, math.inf)
    assert to_python(run(desugar_sub(f - stack(0.5, 0.0, 1.0)))) == [1.0, -0.0, math.inf]


def test_ch02_count_ops_counts_distinct_nodes() -> None:
    count_ops = load("ch02_count_ops").count_ops
    x = param(0)
    g = (x + 1) * (x + 1) + x
    assert count_ops(g) == Counter({"PARAM": 1, "CONST": 1, "ADD": 2, "MUL": 1})
    assert count_ops(g) == Counter(u.op.name for u in g.toposort())


def test_ch03_trunc_div_matches_c() -> None:
    trunc_div = load("ch03_trunc_div").trunc_div
    a, b = param(0), param(1)
    q = trunc_div(a, b)
    for x in range(-9, 10):
        for y in [*range(-9, 0), *range(1, 10)]:
            got = run(substitute(q, {a: UOp.const(x), b: UOp.const(y)})).arg
            assert got == int(x / y), (x, y)


def test_ch03_provably_in_bounds() -> None:
    provably_in_bounds = load("ch03_in_bounds").provably_in_bounds
    i, j = range_(4, 0), range_(3, 1)
    assert provably_in_bounds(i * 3 + j, 12)
    assert not provably_in_bounds(i * 3 + j, 11)
    assert not provably_in_bounds(i - 1, 12)
    assert provably_in_bounds((i * 3 + j + 5) % 12, 12)
    assert not provably_in_bounds(param(0), 12)


def test_ch04_mean_runs() -> None:
    mod = load("ch04_mean")
    assert mod.mean_value() == [5.0]
    assert "reduce_axis" in mod.MEAN


def test_ch04_op_histogram() -> None:
    op_histogram = load("ch04_op_histogram").op_histogram
    text = "%0 = param i32 : 0\n%1 = mul %0, 2\n%2 = add %1, %0\n"
    assert op_histogram(text) == {"add": 1, "const": 1, "mul": 1, "param": 1}
    assert op_histogram(to_uir(stack(1.0, 1.0))) == {"const": 1, "stack": 1}
