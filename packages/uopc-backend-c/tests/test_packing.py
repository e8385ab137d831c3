"""Matmuls whose plan packs B into panels (uopc.lower.pack): every layout and odd shapes, against numpy."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.ir import AxisType, Ops, UOp
from uopc.lower import Opts, Plan, compile_plan, get_backend, make_plan, normalize

Array = npt.NDArray[Any]


@pytest.fixture(autouse=True)
def pack_small_matmuls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack matmuls of any size, so that odd shapes are cheap to test (the default packs 128^3 and up)."""
    monkeypatch.setattr("uopc.lower.pack.PACK_MIN_WORK", 0)


def matmul(m: int, k: int, n: int, layout: str) -> UOp:
    """C (m x n) = A @ B with A stored (m, k), or (k, m) for "atb"; B stored (k, n), or (n, k) for "abt"."""
    a = UOp.buffer(0, m * k).reshape((k, m) if layout == "atb" else (m, k))
    b = UOp.buffer(1, k * n).reshape((n, k) if layout == "abt" else (k, n))
    a = a.permute((1, 0)) if layout == "atb" else a
    b = b.permute((1, 0)) if layout == "abt" else b
    products = a.reshape((m, 1, k)).expand((m, n, k)) * b.permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return products.sum([2]).reshape((m, n))


def run(plan: Plan, *inputs: Array) -> Array:
    buffers = [x.reshape(-1) for x in inputs] + [np.full(s.size, np.nan, np.float32) for s in plan.buffers[2:]]
    compile_plan(plan, get_backend("C")).executable.run(buffers)
    return buffers[plan.outputs[0]]


def check(m: int, k: int, n: int, layout: str, seed: int = 0) -> Plan:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if layout == "atb" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "abt" else (k, n)).astype(np.float32)
    x, y = (a.T if layout == "atb" else a), (b.T if layout == "abt" else b)
    plan = make_plan(normalize([matmul(m, k, n, layout)])[0], pack=True)
    got = run(plan, a, b).reshape(m, n)
    want = x.astype(np.float64) @ y.astype(np.float64)
    bound = k * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(y))  # sums of k products, in any order
    assert np.all(np.abs(got - want) <= bound), np.abs(got - want).max()
    return plan


@pytest.mark.o0
@pytest.mark.parametrize("layout", ["ab", "abt", "atb"])
@pytest.mark.parametrize(
    ("m", "k", "n"),
    # 1 x N; rows off the tile; one panel and one group of rows, no loop left to thread (notebook entry 87)
    [(1, 37, 64), (5, 17, 192), (8, 9, 32), (64, 33, 64), (12, 300, 128), (7, 33, 96), (300, 7, 32)],
)
def test_packed_matmul_matches_numpy(m: int, k: int, n: int, layout: str) -> None:
    plan = check(m, k, n, layout)
    *copies, product = plan.kernels
    assert product.opts.vector is not None and all(c.opts.vector is None for c in copies)  # B's panels are vectors
    assert plan.steps[0].buffers[0] == 1  # the first copy reads B
    # A is packed too where the reduce strides through it, and the tile takes whole groups of its rows
    assert len(copies) == (2 if layout == "atb" and m % 8 == 0 else 1)
    assert [s.kernel for s in plan.steps] == list(range(len(plan.kernels)))  # the copies run first


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 17),
    k=st.integers(2, 40),
    panels=st.integers(1, 3),
    layout=st.sampled_from(["ab", "abt", "atb"]),
)
def test_packed_matmul_matches_numpy_at_any_shape(m: int, k: int, panels: int, layout: str) -> None:
    check(m, k, 32 * panels, layout, seed=m * k)


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(8, 16, 1), (4, 16, 48), (7, 1, 128)],  # N x 1; columns no panel fills; k = 1, no reduce loop left
)
def test_matmuls_without_panels_or_sums_are_not_packed(m: int, k: int, n: int) -> None:
    assert len(check(m, k, n, "ab").kernels) == 1


def test_a_buffer_read_twice_is_not_packed() -> None:
    """A @ A reads one buffer as both operands: the matmul still needs it unpacked, so there is no copy."""
    a = UOp.buffer(0, 64 * 64).reshape((64, 64))
    rows, columns = a.reshape((64, 1, 64)), a.permute((1, 0)).reshape((1, 64, 64))
    square = (rows.expand((64, 64, 64)) * columns.expand((64, 64, 64))).sum([2])
    assert len(make_plan(normalize([square.reshape((64, 64))])[0], pack=True).kernels) == 1


def test_a_fused_max_keeps_the_matmul_unpacked() -> None:
    """relu(A @ B) fuses a max that vector lanes do not compute (check_vector): the matmul is not packed."""
    plan = make_plan(normalize([matmul(8, 16, 64, "ab").maximum(0.0)])[0], pack=True)
    assert len(plan.kernels) == 1 and plan.kernels[0].opts.vector is None


def test_kernels_equal_but_for_their_vector_axis_get_programs_of_their_own() -> None:
    """The driver lowers equal graphs under equal opts once (pipeline._linear_programs); its key must hold every
    field of Opts, or a kernel with vectors and one without share whichever program came first."""
    plain = make_plan(normalize([matmul(4, 8, 64, "ab")])[0], opt=False)
    (kernel,) = plain.kernels
    twins = (
        dataclasses.replace(kernel, name="lanes", opts=Opts(vector=(1, 16))),
        dataclasses.replace(kernel, name="scalars", opts=Opts()),
    )
    plan = dataclasses.replace(plain, steps=(*plain.steps, *plain.steps), make_kernels=lambda: twins)
    lanes, scalars = compile_plan(plan, get_backend("C")).programs
    assert any(u.op is Ops.RANGE and u.arg.kind is AxisType.VECTOR for u in lanes.uops)
    assert not any(u.op is Ops.RANGE and u.arg.kind is AxisType.VECTOR for u in scalars.uops)
