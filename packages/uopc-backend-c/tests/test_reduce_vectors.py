"""choose_opts's vector lanes in reduce kernels that are not packed (opt.reduce_vector): a matmul below
PACK_MIN_WORK, a sum over a batch, a fused ReLU backward; against numpy, NaN and signed zeros included."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.ir import UOp, dtypes
from uopc.lower import Plan, compile_plan, get_backend, make_plan, normalize

Array = npt.NDArray[Any]


def plan_and_run(graph: UOp, *by_slot: Array) -> tuple[Plan, Array]:
    """The default unpacked plan of a graph over buffers 0, 1, ..., run on `by_slot`, and its output."""
    normalized, inputs = normalize([graph])
    plan = make_plan(normalized, pack=0)
    buffers = [by_slot[u.arg.slot].reshape(-1) for u in inputs]
    buffers += [np.full(s.size, np.nan, np.float32) for s in plan.buffers[len(inputs) :]]
    compile_plan(plan, get_backend("C")).executable.run(buffers)
    return plan, buffers[plan.outputs[0]]


def matmul(m: int, k: int, n: int) -> UOp:
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


def within_rounding(got: Array, a: Array, b: Array) -> bool:
    """Whether got is a @ b up to the rounding of sums of k float32 products in any order."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = a.shape[1] * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    return bool(np.all(np.abs(got - want) <= bound))


@pytest.mark.o0
# rows off the register tile; one vector; the MLP's dy @ W2 (k = 10); several vectors and a long sum
@pytest.mark.parametrize(("m", "k", "n"), [(5, 7, 32), (8, 3, 16), (128, 10, 128), (24, 100, 64)])
def test_a_small_matmul_runs_on_vector_lanes_as_numpy(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    plan, got = plan_and_run(matmul(m, k, n), a, b)
    vector = plan.kernels[0].opts.vector
    assert vector is not None and vector[1] == 16
    assert within_rounding(got.reshape(m, n), a, b)


def test_nan_and_inf_pass_through_vector_lanes_as_numpy() -> None:
    m, k, n = 16, 12, 48
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    a.reshape(-1)[::29], b.reshape(-1)[3::41], b.reshape(-1)[5::53] = np.nan, np.inf, -np.inf
    plan, got = plan_and_run(matmul(m, k, n), a, b)
    assert plan.kernels[0].opts.vector is not None
    with np.errstate(invalid="ignore"):
        want = a @ b
    got = got.reshape(m, n)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    assert np.allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.o0
def test_a_sum_over_the_batch_runs_on_vector_lanes() -> None:
    """A bias's gradient: each of 48 columns summed over 37 rows, the lanes along the columns."""
    dy = np.random.default_rng(37).standard_normal((37, 48)).astype(np.float32)
    plan, got = plan_and_run(UOp.buffer(0, 37 * 48).reshape((37, 48)).sum([0]).reshape((48,)), dy)
    assert plan.kernels[0].opts.vector is not None
    np.testing.assert_allclose(got, dy.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_sums_along_rows_and_columns_off_whole_vectors_stay_scalar() -> None:
    """A row's sum reads its lanes a row apart (stride 48), and 24 columns fill no vector: scalar tiles."""
    rows = UOp.buffer(0, 37 * 48).reshape((37, 48)).sum([1]).reshape((37,))
    columns = UOp.buffer(0, 37 * 24).reshape((37, 24)).sum([0]).reshape((24,))
    for graph in (rows, columns):
        assert make_plan(normalize([graph])[0], pack=0).kernels[0].opts.vector is None


@pytest.mark.o0
def test_a_fused_relu_backward_selects_on_vector_lanes_as_numpy() -> None:
    """The MLP's dh = (dlogits @ W2) where the layer's input x + b is above 0: NaN in x (no comparison holds,
    the product passes), -0.0 and 0.0 (both <= 0: zero)."""
    m, k, n = 128, 10, 128
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    x, bias = rng.standard_normal((m, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x.reshape(-1)[::5], x.reshape(-1)[1::7], bias[::3] = np.nan, -0.0, 0.0
    x.reshape(-1)[2::7] = 0.0
    graph = (UOp.buffer(2, m * n).reshape((m, n)) + UOp.buffer(3, n).reshape((1, n)).expand((m, n)) <= 0.0).where(
        0.0, matmul(m, k, n)
    )
    plan, got = plan_and_run(graph, a, b, x, bias)
    assert plan.kernels[-1].opts.vector is not None
    got = got.reshape(m, n)
    product = a.astype(np.float64) @ b.astype(np.float64)
    want = np.where(x + bias <= 0, 0.0, product)
    assert np.array_equal(got == 0, want == 0) and within_rounding(np.where(want == 0, product, got), a, b)


@pytest.mark.o0
def test_a_selection_by_a_condition_the_same_for_all_lanes_compiles_and_selects_as_numpy() -> None:
    """A row's flag (a bool that does not move along the lanes) picks the product or zero: the renderer
    spreads the flag over the lanes as a mask (the GPT's gradient of its joined q, k, v projections)."""
    m, k, n = 16, 8, 32
    rng = np.random.default_rng(16)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    flags = rng.random(m) < 0.5
    keep = UOp.buffer(2, m, dtypes.bool).reshape((m, 1)).expand((m, n))
    plan, got = plan_and_run(keep.where(matmul(m, k, n), 0.0), a, b, flags)
    assert plan.kernels[-1].opts.vector is not None
    got = got.reshape(m, n)
    assert np.all(got[~flags] == 0) and within_rounding(got[flags], a[flags], b)
