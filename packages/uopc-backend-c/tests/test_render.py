"""The C renderer: the shape of the code it writes (hoisting, helpers only where needed), and the values
of the code it writes for the cases C spells differently from the IR: literals, inf and nan, casts,
narrow integers, floor division, every dtype."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import CExecutable, Program, c_literal, render_c
from uopc.ir import DType, Ops, UOp, dtypes, range_, sink
from uopc.lower import Kernel, Opts, Step, linearize, rangeify

Build = Callable[[Sequence[Kernel], Sequence[Step]], CExecutable]

Array = npt.NDArray[Any]


def kernel_of(value: UOp, name: str = "k") -> Kernel:
    """The kernel writing `value` into the slot after its inputs' slots."""
    slots = [u.arg.slot for u in value.toposort() if u.op is Ops.BUFFER]
    dest = UOp.buffer(max(slots, default=-1) + 1, value.size, value.scalar_dtype)
    return Kernel(name, rangeify([(dest, value)]))


def run(value: UOp, *inputs: Array) -> Array:
    """Lower, compile and run `value` (its BUFFERs are slots 0..n-1) on `inputs`; the result has its shape."""
    kernel = kernel_of(value)
    out = np.zeros(value.size, value.scalar_dtype.np_name)
    Program(render_c(linearize(kernel)), kernel.name)(*inputs, out)
    return out.reshape(value.shape)


def lines_of(source: str) -> list[str]:
    return source.splitlines()


def line_index(lines: list[str], needle: str) -> int:
    found = [n for n, line in enumerate(lines) if needle in line]
    assert len(found) == 1, (needle, found)
    return found[0]


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# ---------------------------------------------------------------------------------------------------------
# Structure of the C text
# ---------------------------------------------------------------------------------------------------------


def test_loop_invariant_load_is_hoisted_out_of_the_inner_loop() -> None:
    # out[i, j] = x[i] * y[i, j]: the read of x depends on the outer index only
    x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))
    source = render_c(linearize(kernel_of(x * UOp.buffer(1, 12).reshape((3, 4)))))
    lines = lines_of(source)
    outer, inner = line_index(lines, "for (long long idx0"), line_index(lines, "for (long long idx1")
    x_read = line_index(lines, "= data0[")
    assert outer < x_read < inner, source
    assert indent(lines[x_read]) == indent(lines[inner])  # in the outer loop's body, beside the inner loop
    a = np.arange(3, dtype=np.float32) + 1
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(run(x * UOp.buffer(1, 12).reshape((3, 4)), a, b.reshape(-1)), a[:, None] * b)


def test_index_division_of_loop_indices_is_plain_c() -> None:
    # loop indices are never negative, so C's truncating / and % are floor division: no helper needed
    transposed = UOp.buffer(0, 24, dtypes.int32).reshape((4, 6)).permute((1, 0)).reshape((24,))
    source = render_c(linearize(kernel_of(transposed)))
    assert "/" in source and "%" in source
    assert "floordiv" not in source and "floormod" not in source


def test_division_of_data_uses_the_floor_helpers() -> None:
    # data may be negative: C would truncate -7 / 2 to -3 where the IR (and numpy) floor it to -4
    x = UOp.buffer(0, 8, dtypes.int32)
    value = (x // 2) * 100 + (x % 3)
    source = render_c(linearize(kernel_of(value)))
    assert "static inline int floordiv_i32" in source and "static inline int floormod_i32" in source
    data = np.array([-7, -6, -1, 0, 1, 5, 6, 7], np.int32)
    np.testing.assert_array_equal(run(value, data), (data // 2) * 100 + data % 3)


def test_helpers_are_defined_once_and_only_when_used() -> None:
    x = UOp.buffer(0, 4)
    source = render_c(linearize(kernel_of(x.maximum(1.0).maximum(x * 2.0))))
    assert source.count("static inline float max_f32") == 1
    assert "min_" not in source and "floordiv" not in source


@pytest.mark.o0
@pytest.mark.parametrize("vector", [False, True])
def test_a_prefetch_hint_asks_for_the_element_ahead_and_leaves_the_values_alone(vector: bool) -> None:
    """out[i] = 2 x[i], the read of x hinted 48 elements ahead (UOp.load): one __builtin_prefetch right before
    the read, of that element's address; the last reads' hints point past x's 96 floats, which must be
    harmless (CI runs this test under the sanitizers too)."""
    x, out = UOp.define_global(0, 96), UOp.define_global(1, 96)
    i = range_(UOp.const(96, dtypes.int32), 0)
    ast = sink(out.store(i, x.load(i, prefetch=48) * 2.0).end(i))
    program = linearize(Kernel("k", ast, Opts(vector=(0, 16)) if vector else Opts()))
    lines = lines_of(render_c(program))
    hint = line_index(lines, "__builtin_prefetch(")
    assert "(__UINTPTR_TYPE__)(data0 + " in lines[hint] and "+ 48 * sizeof *data0" in lines[hint]
    assert "= data0[" in lines[hint + 1] or "(data0 + " in lines[hint + 1]  # the read itself, right after
    a = np.random.default_rng(4).standard_normal(96).astype(np.float32)
    got = np.zeros(96, np.float32)
    Program(render_c(program), "k")(a, got)
    np.testing.assert_array_equal(got, a * 2)


# ---------------------------------------------------------------------------------------------------------
# Literals and special values
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "text"),
    [
        (1.5, dtypes.float32, "1.5f"),
        (-1.5, dtypes.float32, "(-1.5f)"),
        (2.0, dtypes.float64, "2.0"),
        (math.inf, dtypes.float32, "INFINITY"),
        (-math.inf, dtypes.float32, "(-INFINITY)"),
        (math.nan, dtypes.float64, "((double)NAN)"),
        (0.5, dtypes.float16, "((_Float16)0.5f)"),
        (-1.5, dtypes.bfloat16, "(-1.5f)"),  # a bfloat16 value is a C float (render.c_type)
        (math.inf, dtypes.bfloat16, "INFINITY"),
        (True, dtypes.bool, "1"),
        (-(2**31), dtypes.int32, "(-2147483647-1)"),
        (2**63 - 1, dtypes.int64, "9223372036854775807LL"),
        (2**64 - 1, dtypes.uint64, "18446744073709551615ull"),
    ],
)
def test_c_literal(value: float, dtype: DType, text: str) -> None:
    assert c_literal(value, dtype) == text


@pytest.mark.o0
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64, dtypes.float16])
def test_inf_nan_and_negative_literals_compute(dtype: DType) -> None:
    x = UOp.buffer(0, 5, dtype)
    inf, nan = UOp.const(math.inf, dtype), UOp.const(math.nan, dtype)
    cases = {
        "inf": (x < 0.0).where(-inf, inf),
        "nan": (x < 1.0).where(nan, x),
        "minus-negative": x - (-1.5),  # rendered `x - (-1.5f)`, never `x--1.5f`
        "times-negative": x * -0.25,
        "divide-by-zero": x / 0.0,  # inf, -inf or nan by the sign of x: no trap
    }
    np_dtype = np.dtype(dtype.np_name)
    data = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np_dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = {
            "inf": np.where(data < 0, -np.inf, np.inf),
            "nan": np.where(data < 1, np.nan, data),
            "minus-negative": data + np_dtype.type(1.5),
            "times-negative": data * np_dtype.type(-0.25),
            "divide-by-zero": data / np_dtype.type(0.0),
        }
    for name, value in cases.items():
        np.testing.assert_array_equal(run(value, data), want[name].astype(np_dtype), err_msg=name)


@pytest.mark.o0
def test_casts_compute_like_numpy() -> None:
    f = np.array([-2.75, -0.5, -0.0, 0.5, 2.75, 100.9, np.nan, 3.0], np.float32)
    x = UOp.buffer(0, 8)
    finite = np.nan_to_num(f, nan=1.0)
    # float -> int truncates toward zero (a cast of nan to an int is undefined in C, so it is kept out)
    np.testing.assert_array_equal(run(x.cast(dtypes.int32), finite), finite.astype(np.int32))
    np.testing.assert_array_equal(run(x.cast(dtypes.int8), finite), finite.astype(np.int8))
    # float -> bool is "not zero": nan is true, -0.0 is false
    np.testing.assert_array_equal(run(x.cast(dtypes.bool), f), f.astype(np.bool_))
    # bool results: a comparison stored as bool, and a bool cast back to float
    np.testing.assert_array_equal(run(x < 0.5, f), f < 0.5)
    np.testing.assert_array_equal(run((x < 0.5).cast(dtypes.float32), f), (f < 0.5).astype(np.float32))
    # int -> float and int -> narrower int (wraps)
    i = np.array([-300, -1, 0, 1, 127, 128, 255, 70000], np.int32)
    y = UOp.buffer(0, 8, dtypes.int32)
    np.testing.assert_array_equal(run(y.cast(dtypes.float64), i), i.astype(np.float64))
    np.testing.assert_array_equal(run(y.cast(dtypes.uint8), i), i.astype(np.uint8))
    np.testing.assert_array_equal(run(y.cast(dtypes.bool), i), i.astype(np.bool_))


@pytest.mark.o0
@pytest.mark.parametrize("dtype", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16])
def test_narrow_integers_wrap_inside_expressions(dtype: DType) -> None:
    # C computes char and short in int: (x + y) < z must compare the wrapped sum, as numpy and the IR do
    np_dtype = np.dtype(dtype.np_name)
    info = np.iinfo(np_dtype)
    x = np.array([info.max, info.max, info.min, 3, info.max // 2 + 1, 7], np_dtype)
    y = np.array([1, 2, 0, 4, 2, 9], np_dtype)
    z = np.array([5, 0, 1, 8, 0, 2], np_dtype)
    a, b, c = (UOp.buffer(k, 6, dtype) for k in range(3))
    np.testing.assert_array_equal(run((a + b) < c, x, y, z), (x + y) < z)
    np.testing.assert_array_equal(run((a * b) < c, x, y, z), (x * y) < z)
    np.testing.assert_array_equal(run((a - b) < c, x, y, z), (x - y) < z)
    np.testing.assert_array_equal(run((a * b) // 3, x, y), (x * y) // np_dtype.type(3))
    if dtype.kind == "int":
        np.testing.assert_array_equal(run((-a) < b, x, z), (-x) < z)


def index_kernel(value_of: Callable[[UOp, UOp], UOp], n: int) -> tuple[str, Callable[..., None]]:
    """A kernel out[i] = value_of(i, x) over an int32 loop index i and int32 input x, and its compiled C."""
    i = range_(UOp.const(n, dtypes.int32), 0)
    x = UOp.define_global(0, n, dtypes.int32)
    out = UOp.define_global(1, n, dtypes.bool)
    source = render_c(linearize(Kernel("k", sink(out.store(i, value_of(i, x.load(i))).end(i)))))
    return source, Program(source, "k")


def test_loop_indices_and_arithmetic_that_cannot_wrap_are_64_bit_integers() -> None:
    # i * 1000 + 7 < 4000 lies in [7, 3007] for i in 0..3: the same at either width, and at pointer width gcc
    # steps addresses through the loop instead of sign-extending an int every iteration (notes 155)
    source, _ = index_kernel(lambda i, v: (i * 1000 + 7) < v, 4)
    assert "for (long long idx0 = 0; idx0 < 4; idx0++)" in source
    assert "(((idx0*1000)+7)<val0)" in source


def test_an_index_product_that_can_wrap_wraps_at_32_bits() -> None:
    # i * 2^30 wraps past 2^31 - 1 at i = 2, 3 (numpy's int32, the IR's exec_alu): computed in 64 bits
    # it would not, and the comparison would be false
    source, kernel = index_kernel(lambda i, v: (i * (1 << 30)) < v, 4)
    out = np.zeros(4, np.bool_)
    kernel(np.zeros(4, np.int32), out)
    np.testing.assert_array_equal(out, (np.arange(4, dtype=np.int32) * np.int32(1 << 30)) < 0)
    assert "((int)idx0)" in source


def test_data_added_to_an_index_wraps_at_32_bits() -> None:
    # x + i may wrap (x is any int32): the sum is an int, its wide operand cast back before the add
    x = np.array([2**31 - 1, 2**31 - 1, 2**31 - 6, -3], np.int32)
    _, kernel = index_kernel(lambda i, v: (v + i) < 0, 4)
    out = np.zeros(4, np.bool_)
    kernel(x, out)
    np.testing.assert_array_equal(out, (x + np.arange(4, dtype=np.int32)) < 0)


# ---------------------------------------------------------------------------------------------------------
# Every dtype renders, compiles and computes (bfloat16, stored as its bits: test_half_precision.py)
# ---------------------------------------------------------------------------------------------------------

COMPUTE_DTYPES = [d for d in dtypes.all() if d is not dtypes.bfloat16]


def dtype_kernel(dtype: DType) -> tuple[Kernel, UOp]:
    """A kernel exercising the dtype's arithmetic, comparisons, max and a sum: x*y + max(x, y) per row sum."""
    x, y = UOp.buffer(0, 12, dtype).reshape((3, 4)), UOp.buffer(1, 12, dtype).reshape((3, 4))
    if dtype.is_bool:
        value = ((x & y) | (x ^ y)).reduce(Ops.MAX, [1])
    else:
        value = (x * y + x.maximum(y) - (x < y).where(x, y)).sum([1])
    value = value.reshape((3,))
    return Kernel(f"k_{dtype.short}", rangeify([(UOp.buffer(2, 3, dtype), value)])), value


def dtype_reference(dtype: DType, a: Array, b: Array) -> Array:
    a2, b2 = a.reshape(3, 4), b.reshape(3, 4)
    if dtype.is_bool:
        return np.asarray(np.max((a2 & b2) | (a2 ^ b2), axis=1))
    return np.asarray((a2 * b2 + np.maximum(a2, b2) - np.where(a2 < b2, a2, b2)).sum(axis=1, dtype=a.dtype))


@pytest.mark.o0
def test_every_dtype_but_bfloat16_compiles_and_computes(build_kernels: Build) -> None:
    kernels = [dtype_kernel(d)[0] for d in COMPUTE_DTYPES]
    exe = build_kernels(kernels, [])  # one gcc call for all of them
    rng = np.random.default_rng(0)
    for n, dtype in enumerate(COMPUTE_DTYPES):
        np_dtype = np.dtype(dtype.np_name)
        if dtype.is_bool:
            a, b = rng.random(12) < 0.5, rng.random(12) < 0.5
        elif dtype.is_float:
            a, b = rng.uniform(-3, 3, 12).astype(np_dtype), rng.uniform(-3, 3, 12).astype(np_dtype)
        else:
            lo = 0 if dtype.kind == "uint" else -9
            a, b = rng.integers(lo, 10, 12).astype(np_dtype), rng.integers(lo, 10, 12).astype(np_dtype)
        out = np.zeros(3, np_dtype)
        exe.run_kernel(n, [a, b, out])
        want = dtype_reference(dtype, a, b)
        if dtype is dtypes.float16:  # C may keep float16 intermediates in float precision
            np.testing.assert_allclose(out, want, rtol=1e-2, atol=1e-2, err_msg=dtype.name)
        elif dtype.is_float:
            np.testing.assert_allclose(out, want, rtol=1e-5, err_msg=dtype.name)
        else:
            np.testing.assert_array_equal(out, want, err_msg=dtype.name)
