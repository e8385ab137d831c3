"""Matmuls on a GPU: which kernels are matmuls, tiles in shared memory with a register tile per thread, and
tensor cores for 16-bit floats; every variant emulated against numpy, and compiled by nvcc with no spill.

numpy multiplies the same (rounded) inputs in float64 here, the oracle; the emulated kernels add in float32
in their own order (tensor cores, in an order the hardware does not document), so sums are compared within
a bound that grows with the length of the sum."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopc.backend.c import numpy_dtype
from uopc.backend.cuda import (
    EmulationError,
    GPUOpts,
    GPUProgram,
    choose_gpu_opts,
    emulate,
    lower_gpu,
    ptxas_report,
    render_cuda,
)
from uopc.backend.cuda.emulator import bfloat16_bits, bfloat16_value
from uopc.backend.cuda.gemm import find_matmul, tile_matmul
from uopc.backend.cuda.launch import Grid
from uopc.ir import DType, Ops, UOp, dtypes
from uopc.lower import Kernel, LowerError, linear_order

KernelsOf = Callable[..., list[Kernel]]
Array = np.ndarray[Any, Any]


def matmul(a: UOp, b: UOp) -> UOp:
    """a @ b for a (..., M, K) and b (..., K, N), built as the Tensor library builds it: products, summed."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    full = (*batch, m, n, k)
    x = a.reshape((*batch, m, 1, k)).expand(full)
    y = b.reshape((*batch, k, n, 1)).permute((*range(len(batch)), len(batch) + 2, len(batch) + 1, len(batch)))
    return (x * y.reshape((*batch, 1, n, k)).expand(full)).sum([len(full) - 1]).reshape((*batch, m, n))


def rounded(x: Array, dtype: DType) -> tuple[Array, Array]:
    """x in dtype's buffer representation, and the values it holds as float64."""
    if dtype is dtypes.bfloat16:
        bits = bfloat16_bits(x.astype(np.float32))
        return bits, bfloat16_value(bits).astype(np.float64)
    stored = x.astype(numpy_dtype(dtype))
    return stored, stored.astype(np.float64)


def emulate_kernel(kernel: Kernel, inputs: list[Array], opts: GPUOpts | None = None) -> Array:
    program = lower_gpu(kernel, opts)
    out = np.zeros(program.params[0].size, numpy_dtype(program.params[0].dtype))
    emulate(program, [out, *(i.reshape(-1) for i in inputs)])
    return bfloat16_value(out).astype(np.float64) if program.params[0].dtype is dtypes.bfloat16 else out


def assert_matmul_close(got: Array, a: Array, b: Array, out_dtype: DType) -> None:
    want = a @ b
    k = a.shape[-1]
    bound = 2 * k * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    if out_dtype in (dtypes.float16, dtypes.bfloat16):  # and the result is rounded to the output type once
        bound += np.abs(want) * (2.0**-11 if out_dtype is dtypes.float16 else 2.0**-8)
    err = np.abs(got.reshape(want.shape) - want)
    assert np.all(err <= bound), f"worst error {err.max()} where the bound is {bound.flat[np.argmax(err - bound)]}"


# ---- which kernels are matmuls ------------------------------------------------------------------------------


def test_matmuls_are_found_in_every_layout_with_their_axes(kernels_of: KernelsOf) -> None:
    a, b = UOp.buffer(0, 32 * 48).reshape((32, 48)), UOp.buffer(1, 48 * 16).reshape((48, 16))
    for root in [matmul(a, b), matmul(b.permute((1, 0)), a.permute((1, 0))), (matmul(a, b) + 1.0).maximum(0.0)]:
        (kernel,) = kernels_of(root)
        mm = find_matmul(kernel.ast)
        assert mm is not None and mm.sizes[2] == 48
        assert {mm.sizes[0], mm.sizes[1]} == {32, 16} and mm.batch == ()
    batched = UOp.buffer(0, 3 * 32 * 48).reshape((3, 32, 48))
    (kernel,) = kernels_of(matmul(batched, UOp.buffer(1, 3 * 48 * 16).reshape((3, 48, 16))))
    mm = find_matmul(kernel.ast)
    assert mm is not None and mm.sizes == (32, 16, 48) and len(mm.batch) == 1


def test_other_kernels_are_not_matmuls(kernels_of: KernelsOf) -> None:
    x = UOp.buffer(0, 32 * 48).reshape((32, 48))
    roots = [x.exp(), x.sum([1]), (x * x).sum([1]), x.reshape((32, 6, 8)).sum([1, 2]), (x * 2.0).sum([0])]
    for root in roots:
        (kernel,) = kernels_of(root)
        assert find_matmul(kernel.ast) is None, root


# ---- tiles in shared memory -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "tile", "thread_tile"),
    [
        ((128, 96, 64), (64, 64, 16), (4, 4)),
        ((64, 64, 64), (32, 32, 8), (2, 4)),
        ((32, 48, 16), (16, 16, 4), (2, 2)),
        ((64, 16, 32), (16, 16, 16), (4, 2)),
    ],
)
def test_a_tiled_matmul_is_emulated_right_with_no_race(
    shape: tuple[int, int, int], tile: tuple[int, int, int], thread_tile: tuple[int, int], kernels_of: KernelsOf
) -> None:
    """The emulator checks every shared access: a race between the cooperative stores and the reads of the
    register tiles would fail the run, not just give a wrong number."""
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    (kernel,) = kernels_of(matmul(UOp.buffer(0, m * k).reshape((m, k)), UOp.buffer(1, k * n).reshape((k, n))))
    opts = GPUOpts(tile=tile, thread_tile=thread_tile)
    program = lower_gpu(kernel, opts)
    assert program.launch.grid == (n // tile[1], m // tile[0], 1)
    assert program.launch.threads == (tile[0] // thread_tile[0]) * (tile[1] // thread_tile[1])
    assert sum(u.op is Ops.DEFINE_ACC for u in program.uops) == thread_tile[0] * thread_tile[1]
    got = emulate_kernel(kernel, [a, b], opts)
    assert_matmul_close(got, a.astype(np.float64), b.astype(np.float64), dtypes.float32)


def test_one_barrier_per_step_of_k_and_double_buffered_tiles(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(matmul(UOp.buffer(0, 128 * 96).reshape((128, 96)), UOp.buffer(1, 96 * 64).reshape((96, 64))))
    source = render_cuda([lower_gpu(kernel, GPUOpts(tile=(64, 64, 16)))])
    assert source.count("__syncthreads();") == 1
    assert "__shared__ float smem0[2048];" in source and "__shared__ float smem1[2048];" in source  # 2 x 64 x 16


def test_single_buffered_tiles_race_and_the_emulator_says_where(kernels_of: KernelsOf) -> None:
    """With one copy of each tile, iteration kt+1 overwrites what other threads read in iteration kt with
    no barrier between: lockstep emulation would give the right numbers, and reports the race instead."""
    (kernel,) = kernels_of(matmul(UOp.buffer(0, 64 * 32).reshape((64, 32)), UOp.buffer(1, 32 * 64).reshape((32, 64))))
    mm = find_matmul(kernel.ast)
    assert mm is not None
    grid = Grid()
    ast = tile_matmul(mm, GPUOpts(tile=(32, 32, 8), thread_tile=(2, 2)), grid, copies=1)
    uops = tuple(linear_order(ast))
    program = GPUProgram("one_copy", kernel.params, kernel.written, uops, frozenset(), grid.launch())
    inputs = [np.zeros(64 * 32, np.float32), np.zeros(32 * 64, np.float32)]
    where = r"one_copy: thread \(\d+, \d+, 0\) of block \(0, 0, 0\) writes smem0\[\d+\], which"
    with pytest.raises(EmulationError, match=where):
        emulate(program, [np.zeros(64 * 64, np.float32), *inputs])


def test_the_rest_of_the_kernel_runs_on_each_tiles_outputs(kernels_of: KernelsOf) -> None:
    """relu(a @ b + bias): the bias load and the activation follow the sum, for every output of the tile."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    x, w = UOp.buffer(0, 64 * 32).reshape((64, 32)), UOp.buffer(1, 32 * 32).reshape((32, 32))
    root = (matmul(x, w) + UOp.buffer(2, 32).reshape((1, 32)).expand((64, 32))).maximum(0.0)
    (kernel,) = kernels_of(root)
    assert choose_gpu_opts(kernel.ast).tile != (0, 0, 0)
    got = emulate_kernel(kernel, [a, b, bias])
    np.testing.assert_allclose(got.reshape(64, 32), np.maximum(a @ b + bias, 0), rtol=1e-5, atol=1e-5)


def test_batched_matmuls_put_the_batch_along_z(kernels_of: KernelsOf) -> None:
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 32, 16)).astype(np.float32), rng.standard_normal((3, 16, 32)).astype(np.float32)
    (kernel,) = kernels_of(matmul(UOp.buffer(0, a.size).reshape(a.shape), UOp.buffer(1, b.size).reshape(b.shape)))
    opts = choose_gpu_opts(kernel.ast)
    assert opts.tile == (32, 32, 16)
    assert lower_gpu(kernel).launch.grid == (1, 1, 3)
    got = emulate_kernel(kernel, [a, b])
    assert_matmul_close(got, a.astype(np.float64), b.astype(np.float64), dtypes.float32)


def test_a_shape_no_tile_divides_keeps_one_thread_per_output(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(matmul(UOp.buffer(0, 100 * 30).reshape((100, 30)), UOp.buffer(1, 30 * 10).reshape((30, 10))))
    assert choose_gpu_opts(kernel.ast).tile == (0, 0, 0)
    with pytest.raises(LowerError, match=r"tile \(16, 16, 4\) with \(4, 4\) outputs per thread does not fit"):
        lower_gpu(kernel, GPUOpts(tile=(16, 16, 4)))


# ---- tensor cores -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize(("shape", "tile"), [((128, 64, 64), (64, 64, 16)), ((32, 48, 96), (32, 32, 16))])
def test_tensor_cores_multiply_16_bit_floats_with_float32_sums(
    dtype: DType, shape: tuple[int, int, int], tile: tuple[int, int, int], kernels_of: KernelsOf
) -> None:
    m, k, n = shape
    rng = np.random.default_rng(m * k)
    (a, a64), (b, b64) = rounded(rng.standard_normal((m, k)), dtype), rounded(rng.standard_normal((k, n)), dtype)
    x, w = UOp.buffer(0, m * k, dtype).reshape((m, k)), UOp.buffer(1, k * n, dtype).reshape((k, n))
    (kernel,) = kernels_of(matmul(x, w))
    opts = choose_gpu_opts(kernel.ast)
    assert opts.tensor_cores and opts.tile == tile
    program = lower_gpu(kernel)
    assert program.launch.threads == 128  # four warps
    pieces = (tile[0] // 32) * (tile[1] // 16)  # 16 x 8 pieces per warp
    assert sum(u.op is Ops.MMA for u in program.uops) == 4 * pieces
    assert_matmul_close(emulate_kernel(kernel, [a, b]), a64, b64, dtype)


def test_the_mma_fragments_follow_the_documented_layout() -> None:
    """One warp, one m16n8k16 product of known matrices: lane l holds D[l//4 + 8*(i//2), 2*(l%4) + i%2]."""
    from uopc.backend.cuda.emulator import warp_products

    rng = np.random.default_rng(7)
    a, b = rng.integers(-3, 4, (16, 16)).astype(np.float16), rng.integers(-3, 4, (16, 8)).astype(np.float16)
    lane = np.arange(32)
    g, q = lane // 4, lane % 4
    values = [a[g + 8 * ((i // 2) % 2), 2 * q + i % 2 + 8 * (i // 4)] for i in range(8)]
    values += [b[2 * q + i % 2 + 8 * (i // 2), g] for i in range(4)]
    d = warp_products(values, lane)
    want = a.astype(np.float32) @ b.astype(np.float32)
    for i in range(4):
        np.testing.assert_array_equal(d[i], want[g + 8 * (i // 2), 2 * q + i % 2])


def test_tensor_cores_need_16_bit_floats(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(matmul(UOp.buffer(0, 64 * 64).reshape((64, 64)), UOp.buffer(1, 64 * 64).reshape((64, 64))))
    assert not choose_gpu_opts(kernel.ast).tensor_cores
    with pytest.raises(LowerError, match="on tensor cores does not fit"):
        lower_gpu(kernel, GPUOpts(tile=(64, 64, 16), tensor_cores=True))


# ---- what ptxas says --------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: no ptxas report here")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_gemm_kernels_compile_without_spilling_registers(arch: str, kernels_of: KernelsOf, tmp_path: Path) -> None:
    programs = []
    for dtype in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        x, w = UOp.buffer(0, 256 * 256, dtype).reshape((256, 256)), UOp.buffer(1, 256 * 256, dtype).reshape((256, 256))
        (kernel,) = kernels_of(matmul(x, w))
        programs.append(lower_gpu(Kernel(f"gemm_{dtype.name}", kernel.ast)))
    reports = ptxas_report(render_cuda(programs), arch, tmp_path)
    assert {r.name for r in reports} == {p.name for p in programs}
    for r in reports:
        assert r.spill_bytes == 0 and r.registers <= 255, r
        assert r.shared_bytes == 2 * 2 * 64 * 16 * 4, r  # two double-buffered 64 x 16 tiles of floats
