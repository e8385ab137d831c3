"""Fixtures for the uopc-lower tests. These tests import uopc.ir, uopc.lower, pytest, hypothesis and the
standard library only: CI runs them where neither numpy nor a backend is installed."""

from collections.abc import Callable

import pytest

from uopc.ir import DType, UOp, dtypes


def gemm_graph(m: int, k: int, n: int, dtype: DType = dtypes.int32) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k, dtype).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n, dtype).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


@pytest.fixture
def gemm() -> Callable[[int, int, int], UOp]:
    """The int32 matmul graph builder (a fixture, since test modules do not import each other)."""
    return gemm_graph
