"""Tensors whose views index past 2**31: a few elements expanded to billions and sliced back to a handful,
against numpy's int64 index arithmetic. In 32-bit indices they returned wrong elements without a word."""

from __future__ import annotations

import numpy as np
import pytest

from uopc.ir import dtypes
from uopc.tensor import Tensor


def test_rows_of_a_huge_repeated_view() -> None:
    x = np.arange(7, dtype=np.float32) + 1
    got = Tensor(x).reshape(1, 7).expand(2**30, 7).reshape(7, 2**30)[:, :2].numpy()
    starts = np.arange(7, dtype=np.int64)[:, None] * 2**30 + np.arange(2, dtype=np.int64)
    np.testing.assert_array_equal(got, x[starts % 7])


def test_a_window_past_two_to_the_31_with_a_step() -> None:
    a, b = 2**15, 6 * 2**29 // 2**15
    x = np.arange(6, dtype=np.int32) * 10
    got = Tensor(x).reshape(1, 6).expand(2**29, 6).reshape(a, b)[a - 2 :, b - 7 :: 3].numpy()
    rows, cols = np.meshgrid(np.arange(a - 2, a), np.arange(b - 7, b, 3), indexing="ij")
    np.testing.assert_array_equal(got, x[(rows.astype(np.int64) * b + cols) % 6])


@pytest.mark.large
def test_a_sum_over_more_than_two_to_the_31_elements() -> None:
    n = 2**31 + 3
    assert Tensor(np.ones(1, np.int64)).expand(n).sum().item() == n
    assert Tensor(np.ones(1, np.int64), dtype=dtypes.int64).reshape(1, 1).expand(2, n).sum(1).tolist() == [n, n]
