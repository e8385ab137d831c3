"""float16 and bfloat16 kernels: sums and matrix products accumulate in float32 and round once, as numpy's
float16 sums do (accumulated in float16, 4096 ones summed to 2048); and bfloat16 computes, each result rounded
to nearest even, against an emulation on float32 bits (numpy has no bfloat16)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import C_BACKEND, ArgumentError, CExecutable, Program, numpy_dtype, render_c
from uopc.ir import Ops, UOp, dtypes
from uopc.lower import Kernel, Opts, Step, choose_opts, linearize, rangeify

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]

Array = npt.NDArray[Any]


def run(value: UOp, *inputs: Array, opt: bool = True) -> Array:
    """Compile and run `value` (reading buffers 0..n-1) on `inputs`; the result has its shape."""
    ast = rangeify([(UOp.buffer(len(inputs), value.size, value.scalar_dtype), value)])
    out = np.zeros(value.size, numpy_dtype(value.scalar_dtype))
    Program(render_c(linearize(Kernel("k", ast, choose_opts(ast) if opt else Opts()))), "k")(*inputs, out)
    return out.reshape(value.shape)


@pytest.mark.o0
@pytest.mark.parametrize("opt", [False, True], ids=["plain", "opt"])
def test_float16_sums_count_past_2048(opt: bool) -> None:
    # 40000 ones: long enough that even a sum split into 16 vector lanes passes 2048 in each lane
    x = np.ones(2 * 40000, np.float16)
    got = run(UOp.buffer(0, x.size, dtypes.float16).reshape((2, 40000)).sum([1]), x, opt=opt)
    np.testing.assert_array_equal(got, x.reshape(2, 40000).sum(1, keepdims=True))
    assert got.dtype == np.float16 and got[0, 0] == 40000


def test_a_float16_select_of_one_element_builds_and_keeps_its_values() -> None:
    """`x >= 0.5 ? y : 0` on one element: with -march=native on a CPU with AVX512-FP16, gcc 12 stored it with
    a masked vmovsh that binutils 2.40 refuses, a CompileError (notebook entry 84). Each element of x is
    tried in its own kernel of one element, the shape that made it."""
    for x, y in [(0.0, 3.0), (0.5, 3.0), (np.nan, -2.0)]:
        a, b = np.array([x], np.float16), np.array([y], np.float16)
        xs, ys = UOp.buffer(0, 1, dtypes.float16), UOp.buffer(1, 1, dtypes.float16)
        got = run((xs >= 0.5).where(ys, 0.0), a, b, opt=False)
        np.testing.assert_array_equal(got, np.where(a >= 0.5, b, np.float16(0.0)))


@pytest.mark.o0
def test_float16_sums_round_once_from_float32() -> None:
    rng = np.random.default_rng(16)
    x = rng.uniform(-4, 4, (5, 1000)).astype(np.float16)
    got = run(UOp.buffer(0, x.size, dtypes.float16).reshape((5, 1000)).sum([1]), x.reshape(-1))
    exact = x.astype(np.float64).sum(1, keepdims=True)
    # float32 partial sums of 1000 float16 values are exact to about 2**-14 of the largest; rounding once to
    # float16 adds half an ulp of the result
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2**-11, atol=1e-2)
    np.testing.assert_allclose(got, x.sum(1, keepdims=True), rtol=2**-10, atol=1e-2)  # numpy's own float16 sum


def test_a_float16_matmul_accumulates_in_float32() -> None:
    rng = np.random.default_rng(17)
    m, k, n = 8, 2048, 8
    a = rng.uniform(0.5, 1.0, (m, k)).astype(np.float16)
    b = rng.uniform(0.5, 1.0, (k, n)).astype(np.float16)
    ua = UOp.buffer(0, m * k, dtypes.float16).reshape((m, 1, k)).expand((m, n, k))
    ub = UOp.buffer(1, k * n, dtypes.float16).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    got = run((ua * ub).sum([2]).reshape((m, n)), a.reshape(-1), b.reshape(-1))
    products = (a[:, None, :] * b.T[None, :, :]).astype(np.float64)  # each product rounded to float16, as the IR says
    np.testing.assert_allclose(got.astype(np.float64), products.sum(2), rtol=2**-10)


# ---------------------------------------------------------------------------------------------------------
# bfloat16 computes: stored as uint16 bit patterns, widened to float, every result rounded to nearest even
# ---------------------------------------------------------------------------------------------------------


def bf16_round(x: Array) -> Array:
    """float32 values rounded to bfloat16 (nearest, ties to even; nan stays nan), emulated on the bits."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    quiet_nan = (bits | 0x400000) & 0xFFFF0000
    out = np.where(np.isnan(np.asarray(x, np.float32)), quiet_nan, rounded).astype(np.uint32)
    return out.view(np.float32)


def bits_of(x: Array) -> Array:
    """The uint16 storage of bfloat16 values held exactly in float32."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def values_of(bits: Array) -> Array:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def bf16_inputs(n: int, seed: int) -> Array:
    """n bfloat16 bit patterns: every kind (zeros, subnormals, normals, inf, nan), and ordinary numbers."""
    rng = np.random.default_rng(seed)
    special = np.array([0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F80], np.uint16)
    ordinary = bits_of(bf16_round(rng.standard_normal(n).astype(np.float32) * 4))
    return np.concatenate([special, rng.integers(0, 2**16, n, dtype=np.uint16), ordinary])


def same_bits(got: Array, want: Array, ulps: int = 0) -> None:
    """bfloat16 results equal to the emulation (nan for nan), or within `ulps` steps of it."""
    g, w = values_of(got), np.asarray(want, np.float32)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    steps = np.abs(got.astype(np.int64)[~nan] - bits_of(w).astype(np.int64)[~nan])
    assert steps.max(initial=0) <= ulps, (g[~nan][steps > ulps][:5], w[~nan][steps > ulps][:5])


BF16_BINARY: dict[str, tuple[Callable[[UOp, UOp], UOp], Callable[[Array, Array], Array]]] = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "max": (lambda a, b: a.maximum(b), np.maximum),
    "min": (lambda a, b: a.minimum(b), np.minimum),
    "where": (lambda a, b: (a < b).where(a, b), lambda a, b: np.where(a < b, a, b)),
}


@pytest.mark.o0
@pytest.mark.parametrize("op", list(BF16_BINARY))
def test_bfloat16_binary_ops_round_each_result(op: str) -> None:
    a_bits, b_bits = bf16_inputs(300, 1), bf16_inputs(300, 2)[::-1].copy()
    build, reference = BF16_BINARY[op]
    n = a_bits.size
    got = run(build(UOp.buffer(0, n, dtypes.bfloat16), UOp.buffer(1, n, dtypes.bfloat16)), a_bits, b_bits)
    assert got.dtype == np.uint16
    with np.errstate(all="ignore"):
        same_bits(got, bf16_round(reference(values_of(a_bits), values_of(b_bits))))


@pytest.mark.o0
@pytest.mark.parametrize(
    ("op", "ulps"),
    [("neg", 0), ("sqrt", 0), ("exp", 1), ("log", 1), ("sin", 1), ("cos", 1), ("pow", 1)],
)
def test_bfloat16_math_rounds_each_result(op: str, ulps: int) -> None:
    # sqrt is exactly rounded in float32 and so in bfloat16; libm's exp, log, ... may differ from numpy's in
    # float32's last bit, which moves a bfloat16 result by at most one step
    x_bits = bf16_inputs(300, 3)
    x = UOp.buffer(0, x_bits.size, dtypes.bfloat16)
    value = {"neg": -x, "pow": x**x}.get(op) or x.alu(getattr(Ops, op.upper()))
    with np.errstate(all="ignore"):
        v = values_of(x_bits)
        want = {"neg": -v, "pow": np.power(v, v)}.get(op)
        want = getattr(np, op)(v) if want is None else want
    same_bits(run(value, x_bits), bf16_round(want), ulps)


@pytest.mark.o0
def test_casts_to_and_from_bfloat16() -> None:
    rng = np.random.default_rng(4)
    f32 = np.concatenate(
        [
            np.array([np.inf, -np.inf, np.nan, -0.0, 3.4e38, 1e-40], np.float32),
            rng.standard_normal(200).astype(np.float32) * 1000,
        ]
    )
    n = f32.size
    same_bits(run(UOp.buffer(0, n).cast(dtypes.bfloat16), f32), bf16_round(f32))
    f64 = rng.standard_normal(n) * 1e3
    same_bits(run(UOp.buffer(0, n, dtypes.float64).cast(dtypes.bfloat16), f64), bf16_round(f64.astype(np.float32)))
    # an integer goes through float32 first, as a float64 does (and as PyTorch converts)
    i32 = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    i32[:3] = [2**24 + 2**16 + 1, 3000, -7]
    same_bits(run(UOp.buffer(0, n, dtypes.int32).cast(dtypes.bfloat16), i32), bf16_round(i32.astype(np.float32)))
    bits = bits_of(bf16_round(f32))
    np.testing.assert_array_equal(run(UOp.buffer(0, n, dtypes.bfloat16).cast(dtypes.float32), bits), values_of(bits))
    np.testing.assert_array_equal(
        run(UOp.buffer(0, n, dtypes.bfloat16).cast(dtypes.float16), bits), values_of(bits).astype(np.float16)
    )


@pytest.mark.o0
def test_bfloat16_sums_accumulate_in_float32() -> None:
    ones = bits_of(np.ones(2 * 3000, np.float32))
    got = run(UOp.buffer(0, ones.size, dtypes.bfloat16).reshape((2, 3000)).sum([1]), ones)
    np.testing.assert_array_equal(values_of(got), [[3008.0], [3008.0]])  # 3000, rounded once to bfloat16


def test_bfloat16_buffers_are_declared_and_checked_as_bit_patterns(build_kernels: Build) -> None:
    x = UOp.buffer(0, 4, dtypes.bfloat16)
    kernel = Kernel("k", rangeify([(UOp.buffer(1, 4, dtypes.bfloat16), x + x)]))
    source = render_c(linearize(kernel))
    assert "const unsigned short data0[restrict static 4]" in source and "bf16_round(" in source
    exe = build_kernels([kernel], [])
    with pytest.raises(ArgumentError, match=r"data0 is dtype float32, expected uint16 \(the bit patterns"):
        exe.run_kernel(0, [np.ones(4, np.float32), np.zeros(4, np.uint16)])
    out = np.zeros(4, np.uint16)
    exe.run_kernel(0, [bits_of(np.array([1, 2, 3, 1.5], np.float32)), out])
    np.testing.assert_array_equal(values_of(out), [2, 4, 6, 3])
    assert C_BACKEND.runtime.allocate(dtypes.bfloat16, 3).dtype == np.uint16
