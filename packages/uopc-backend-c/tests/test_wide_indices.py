"""Kernels whose offsets pass 2**31 compute them in 64-bit C integers, against numpy's int64 index arithmetic.

The inputs are a few elements expanded to billions and cut back to a handful, so no large buffer exists. In
32-bit `int` these kernels returned wrong elements without a word.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import Program, render_c
from uopc.ir import UOp, dtypes
from uopc.lower import Kernel, Opts, choose_opts, linearize, rangeify

Array = npt.NDArray[Any]


def run(value: UOp, x: Array, opt: bool = True) -> tuple[Array, str]:
    """Compile and run `value` (reading buffer 0) on x; the result and the C source."""
    ast = rangeify([(UOp.buffer(1, value.size, value.scalar_dtype), value)])
    source = render_c(linearize(Kernel("k", ast, choose_opts(ast) if opt else Opts())))
    out = np.zeros(value.size, value.scalar_dtype.np_name)
    Program(source, "k")(x, out)
    return out.reshape(value.shape), source


@pytest.mark.o0
def test_rows_of_a_huge_repeated_view() -> None:
    # row r of x (7 elements) repeated 2**30 times, as a (7, 2**30) view, starts at element r * 2**30
    x = np.arange(7, dtype=np.float32) + 1
    view = UOp.buffer(0, 7).reshape((1, 7)).expand((2**30, 7)).reshape((7, 2**30)).shrink(((0, 7), (0, 2)))
    got, source = run(view, x)
    starts = np.arange(7, dtype=np.int64)[:, None] * 2**30 + np.arange(2, dtype=np.int64)
    np.testing.assert_array_equal(got, x[starts % 7])
    assert "long long idx0" in source


@pytest.mark.o0
def test_a_window_past_two_to_the_31() -> None:
    a, b = 2**15, 6 * 2**29 // 2**15
    x = np.arange(6, dtype=np.int32) * 10
    view = UOp.buffer(0, 6, dtypes.int32).reshape((1, 6)).expand((2**29, 6)).reshape((a, b))
    got, _ = run(view.shrink(((a - 2, a), (b - 3, b))), x)
    rows, cols = np.meshgrid(np.arange(a - 2, a, dtype=np.int64), np.arange(b - 3, b, dtype=np.int64), indexing="ij")
    np.testing.assert_array_equal(got, x[(rows * b + cols) % 6])


def test_a_sum_longer_than_two_to_the_31_counts_every_element() -> None:
    n = 2**31 + 3
    ones = UOp.buffer(0, 1, dtypes.int64).reshape((1, 1)).expand((1, n))
    got, source = run(ones.sum([1]).reshape((1,)), np.ones(1, np.int64))
    assert got[0] == n
    assert "long long ridx1" in source
