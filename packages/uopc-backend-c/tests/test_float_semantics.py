"""IEEE float semantics in compiled kernels, with numpy as the oracle: inf, nan and -0.0 survive every
expression gcc could rewrite, and the reorderings the C source grants (vector lanes for sums, fused
multiply-add into an accumulator) change nothing but the rounding of a sum.

Under the old default flags (-fassociative-math -fno-signed-zeros -ffp-contract=fast) gcc folded x * 0.0 to
0, (x + 1) - x to 1 and x + 0.0 to x, and fused x * x - c into one rounding: each case below failed then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import Program, render_c
from uopc.ir import DType, Ops, UOp, dtypes, exec_alu
from uopc.lower import Kernel, Opts, choose_opts, linearize, rangeify

Array = npt.NDArray[Any]

SPECIAL = [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e30, -1e30, 3e38, 3.0, -2.5, 1e-40, 65504.0, 1.0 + 2.0**-13]


def run(value: UOp, *inputs: Array, opt: bool = False) -> Array:
    """Lower, compile and run `value` (reading buffers 0..n-1) on `inputs`; the result has its shape."""
    dest = UOp.buffer(len(inputs), value.size, value.scalar_dtype)
    ast = rangeify([(dest, value)])
    program = linearize(Kernel("k", ast, choose_opts(ast) if opt else Opts()))
    out = np.zeros(value.size, value.scalar_dtype.np_name)
    Program(render_c(program), "k")(*inputs, out)
    return out.reshape(value.shape)


def same(got: Array, want: Array) -> None:
    """Equal as numpy compares floats bit for bit: nan equals nan, and -0.0 differs from 0.0."""
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


ELEMENTWISE: dict[str, tuple[Callable[[UOp], UOp], Callable[[Array], Array]]] = {
    "x*0": (lambda x: x * 0.0, lambda x: x * x.dtype.type(0)),
    "0*x": (lambda x: 0.0 * x, lambda x: x.dtype.type(0) * x),
    "(x+1)-x": (lambda x: (x + 1.0) - x, lambda x: (x + x.dtype.type(1)) - x),
    "x+0": (lambda x: x + 0.0, lambda x: x + x.dtype.type(0)),
    "x-x": (lambda x: x - x, lambda x: x - x),
    "x/x": (lambda x: x / x, lambda x: x / x),
    "0-(0-x)": (lambda x: 0.0 - (0.0 - x), lambda x: x.dtype.type(0) - (x.dtype.type(0) - x)),
    "x*x-c": (lambda x: x * x - (1.0 + 2.0**-12), lambda x: x * x - x.dtype.type(1.0 + 2.0**-12)),
    "x*2*0.5": (lambda x: (x * 2.0) * 0.5, lambda x: (x * x.dtype.type(2)) * x.dtype.type(0.5)),
}


@pytest.mark.o0
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", list(ELEMENTWISE))
def test_elementwise_expressions_keep_ieee_values(case: str, dtype: DType) -> None:
    x = np.array(SPECIAL, dtype.np_name)
    build, reference = ELEMENTWISE[case]
    with np.errstate(all="ignore"):
        want = reference(x)
    same(run(build(UOp.buffer(0, x.size, dtype)), x), want)


def rows() -> Array:
    """Rows of 64 (long enough for vector lanes): finite ones, and ones holding inf, -inf, both, nan, -0.0."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    x[1, 5] = np.inf
    x[2, 60] = -np.inf
    x[3, 0], x[3, 63] = np.inf, -np.inf
    x[4, 33] = np.nan
    x[5] = -0.0
    x[6] = 1e30
    return x


@pytest.mark.o0
@pytest.mark.parametrize("opt", [False, True], ids=["plain", "opt"])
def test_sums_in_vector_lanes_keep_inf_nan_and_the_body_exact(opt: bool) -> None:
    x = rows()
    a = UOp.buffer(0, x.size).reshape(x.shape)
    with np.errstate(all="ignore"):
        # the sum may be reordered, the expression inside it may not: x * 0.0 is nan where x is infinite
        same(run((a * 0.0).sum([1]), x, opt=opt), (x * np.float32(0)).sum(1, keepdims=True))
        same(run(((a + 1.0) - a).sum([1]), x, opt=opt), ((x + np.float32(1)) - x).sum(1, keepdims=True))
    plain = run(a.sum([1]), x, opt=opt)
    with np.errstate(all="ignore"):
        want = x.sum(1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(plain), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(plain) * np.sign(plain), np.isinf(want) * np.sign(want))
    assert plain[5, 0] == 0.0 and not np.signbit(plain[5, 0])  # numpy sums -0.0s to +0.0
    np.testing.assert_allclose(plain[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-5, atol=1e-4)


@pytest.mark.o0
def test_a_matmul_with_inf_gives_nan_where_numpy_does() -> None:
    # acc + a * b may be fused into one multiply-add: inf * 0 is still nan, and inf * finite still inf
    rng = np.random.default_rng(9)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    a[2, 3] = np.inf
    b[3, 5] = 0.0
    ua = UOp.buffer(0, a.size).reshape((8, 1, 16)).expand((8, 8, 16))
    ub = UOp.buffer(1, b.size).reshape((16, 8)).permute((1, 0)).reshape((1, 8, 16)).expand((8, 8, 16))
    got = run((ua * ub).sum([2]).reshape((8, 8)), a.reshape(-1), b.reshape(-1), opt=True)
    with np.errstate(all="ignore"):
        want = (a[:, None, :] * b.T[None, :, :]).sum(2)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


def test_only_sums_over_contiguous_loads_get_vector_lanes() -> None:
    x = UOp.buffer(0, 64 * 64).reshape((64, 64))
    row_sum = render_c(linearize(Kernel("k", rangeify([(UOp.buffer(1, 64), x.sum([1]).reshape((64,)))]))))
    assert "acc0_lanes[8]" in row_sum and "acc0 = (acc0+lanes_sum_f32(acc0_lanes));" in row_sum
    assert "return (((l[0]+l[1])+(l[2]+l[3]))+((l[4]+l[5])+(l[6]+l[7])));" in row_sum  # in a fixed order
    column_sum = render_c(linearize(Kernel("k", rangeify([(UOp.buffer(1, 64), x.sum([0]).reshape((64,)))]))))
    assert "_lanes" not in column_sum  # the loads stride by 64: lanes would gather
    row_max = render_c(linearize(Kernel("k", rangeify([(UOp.buffer(1, 64), x.reduce(Ops.MAX, [1]).reshape((64,)))]))))
    assert "_lanes" not in row_max  # a max keeps the loop's order
    short = UOp.buffer(0, 64 * 10).reshape((64, 10))
    short_sum = render_c(linearize(Kernel("k", rangeify([(UOp.buffer(1, 64), short.sum([1]).reshape((64,)))]))))
    assert "_lanes" not in short_sum  # 10 iterations: lanes would cost more than they save
    odd = UOp.buffer(0, 64 * 60).reshape((64, 60))
    odd_sum = render_c(linearize(Kernel("k", rangeify([(UOp.buffer(1, 64), odd.sum([1]).reshape((64,)))]))))
    assert "_lanes" not in odd_sum  # 60 is no multiple of 8 lanes


def test_only_kernels_whose_products_all_feed_sums_may_fuse_them() -> None:
    a = UOp.buffer(0, 16 * 16).reshape((16, 1, 16)).expand((16, 16, 16))
    b = UOp.buffer(1, 16 * 16).reshape((1, 16, 16)).expand((16, 16, 16))
    matmul = (a * b).sum([2]).reshape((16, 16))

    def source(value: UOp) -> str:
        slots = [u.arg.slot for u in value.toposort() if u.op is Ops.BUFFER]
        return render_c(linearize(Kernel("k", rangeify([(UOp.buffer(max(slots) + 1, value.size), value)]))))

    assert "acc0 = fmaf(val0, val1, acc0);" in source(matmul)
    assert "fma" not in source(matmul * 2.0)  # a product that is not summed: IEEE, unfused
    x = UOp.buffer(0, 8)
    assert "fma" not in source(x * x - 1.0)
    assert "fp-contract" not in source(matmul)  # the fusing is in the text, not left to gcc


@pytest.mark.o0
@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.float32, dtypes.float64], ids=["f16", "f32", "f64"])
@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD], ids=["floordiv", "mod"])
def test_floor_division_and_modulo_of_floats_are_numpys(op: Ops, dtype: DType) -> None:
    """Every pair of special values, bit for bit with the sign of zero: by zero (a / b, and NaN), infinite
    operands (-1 % inf is inf, 7 // -inf is -1), and huge quotients, where a - b * floor(a / b) would be far
    off. The interpreter's semantics (exec_alu, what constant folding computes) agree."""
    with np.errstate(all="ignore"):
        values = np.array(SPECIAL, np.float64).astype(dtype.np_name)
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    reference = np.floor_divide if op is Ops.IDIV else np.mod
    with np.errstate(all="ignore"):
        want = reference(a, b)
    x, y = UOp.buffer(0, a.size, dtype), UOp.buffer(1, b.size, dtype)
    folded = np.array([exec_alu(op, dtype, [float(p), float(q)]) for p, q in zip(a, b, strict=True)], dtype.np_name)
    for got in run(x.alu(op, y), a, b), folded:
        np.testing.assert_array_equal(got, want)
        numbers = ~np.isnan(want)  # the sign of a NaN means nothing, and numpy's differs between its loops
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
