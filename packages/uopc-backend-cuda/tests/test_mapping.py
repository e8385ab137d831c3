"""GPU mapping: output loops become blocks and threads within the device's limits, each output element is
computed by exactly one thread, and long reductions with few outputs are shared by the threads of a block.

Values are checked against numpy by running the mapped programs on the emulator; the launch shapes are
checked against the limits CUDA documents (DeviceLimits)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.backend.cuda import LIMITS, GPUOpts, choose_gpu_opts, lower_gpu
from uopc.ir import AxisType, Ops, UOp, dtypes
from uopc.lower import Kernel, LowerError

Emulated = Callable[..., list[np.ndarray[Any, Any]]]
KernelsOf = Callable[..., list[Kernel]]


def assert_sums_close(got: np.ndarray[Any, Any], a: np.ndarray[Any, Any], axis: int | None) -> None:
    """Sums in another order than numpy's differ by rounding: at most n ulps of the sum of magnitudes."""
    n = a.size if axis is None else a.shape[axis]
    bound = n * np.finfo(a.dtype).eps * np.abs(a).sum(axis)
    assert np.all(np.abs(got - a.sum(axis)) <= bound), np.abs(got - a.sum(axis)).max()


def _ranges(kernel_uops: tuple[UOp, ...], kind: AxisType) -> list[UOp]:
    return [u for u in kernel_uops if u.op is Ops.RANGE and u.arg.kind is kind]


@settings(max_examples=40)
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=5), threads=st.sampled_from([32, 64, 256, 1024]))
def test_every_output_is_written_by_one_thread_within_the_limits(
    shape: list[int], threads: int, kernels_of: KernelsOf, emulated: Emulated
) -> None:
    """An elementwise kernel of any shape: its grid and block stay inside CUDA's limits, its block holds at
    most `threads` threads, and every output element comes out right (an unwritten one would stay NaN)."""
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    (kernel,) = kernels_of(UOp.buffer(0, x.size).reshape(tuple(shape)) * 2.0 + 1.0)
    program = lower_gpu(kernel, GPUOpts(threads=threads))
    launch = program.launch
    assert launch.threads <= min(threads, LIMITS.max_threads)
    assert all(b <= m for b, m in zip(launch.block, LIMITS.max_block, strict=True))
    assert all(g <= m for g, m in zip(launch.grid, LIMITS.max_grid, strict=True))
    assert math.prod(launch.grid) * launch.threads == x.size  # no thread idles, none is missing
    (out, _) = emulated(kernel, [x], GPUOpts(threads=threads))
    np.testing.assert_array_equal(out.reshape(shape), x * 2 + 1)


def test_the_innermost_axis_runs_along_x_so_neighbouring_threads_touch_neighbouring_elements(
    kernels_of: KernelsOf,
) -> None:
    (kernel,) = kernels_of(UOp.buffer(0, 64 * 48).reshape((64, 48)).exp())
    program = lower_gpu(kernel)
    assert program.launch.block == (48, 5, 1) or program.launch.block[0] == 48
    loads = [u for u in program.uops if u.op is Ops.LOAD]
    x_thread = next(u for u in program.uops if u.op is Ops.RANGE and program.launch.hardware(u) == "threadIdx.x")
    assert x_thread in loads[0].src[1].toposort()


def test_outputs_beyond_three_axes_are_flattened_along_z(kernels_of: KernelsOf, emulated: Emulated) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4, 5, 6, 7)).astype(np.float32)
    (kernel,) = kernels_of(UOp.buffer(0, x.size).reshape(x.shape).permute((4, 2, 0, 1, 3)).exp())
    program = lower_gpu(kernel)
    assert {name.split(".")[1] for _, _, name in program.launch.dims} == {"x", "y", "z"}
    (out, _) = emulated(kernel, [x])
    np.testing.assert_allclose(out.reshape(7, 5, 3, 4, 6), np.exp(x.transpose(4, 2, 0, 1, 3)), rtol=1e-6)


def test_a_reduction_with_many_outputs_keeps_one_accumulator_per_thread(
    kernels_of: KernelsOf, emulated: Emulated
) -> None:
    a = np.random.default_rng(1).standard_normal((512, 40)).astype(np.float32)
    (kernel,) = kernels_of(UOp.buffer(0, a.size).reshape((512, 40)).sum([1]))
    assert choose_gpu_opts(kernel.ast).reduce_threads == 0
    program = lower_gpu(kernel)
    assert not any(u.op in (Ops.BARRIER, Ops.SHUFFLE) for u in program.uops)
    assert len(_ranges(program.uops, AxisType.REDUCE)) == 1
    (out, _) = emulated(kernel, [a])
    assert_sums_close(out, a, axis=1)


@pytest.mark.parametrize("op", [Ops.ADD, Ops.MAX, Ops.MIN])
@pytest.mark.parametrize("length", [64, 100, 4096, 5000])
def test_few_outputs_with_a_long_reduction_share_it_across_a_block(
    op: Ops, length: int, kernels_of: KernelsOf, emulated: Emulated
) -> None:
    """Three rows: a block per row, its threads each reduce a strided part, then shuffles and a barrier
    combine them. Lengths that are no multiple of the block (100, 5000) pad with the reduction's identity
    and load nothing past the end (the emulator would report it)."""
    a = np.random.default_rng(length).standard_normal((3, length)).astype(np.float32)
    (kernel,) = kernels_of(UOp.buffer(0, a.size).reshape((3, length)).reduce(op, [1]))
    opts = choose_gpu_opts(kernel.ast)
    assert opts.reduce_threads == min(256, 1 << (length - 1).bit_length())
    program = lower_gpu(kernel)
    assert program.launch.grid == (3, 1, 1) and program.launch.block == (opts.reduce_threads, 1, 1)
    assert sum(u.op is Ops.SHUFFLE for u in program.uops) == 5
    assert sum(u.op is Ops.BARRIER for u in program.uops) == (1 if opts.reduce_threads > 32 else 0)
    (out, _) = emulated(kernel, [a])
    if op is Ops.ADD:
        assert_sums_close(out, a, axis=1)
    else:
        np.testing.assert_array_equal(out, a.max(1) if op is Ops.MAX else a.min(1))


def test_a_cooperative_sum_of_everything_and_of_integers(kernels_of: KernelsOf, emulated: Emulated) -> None:
    x = np.arange(-3000, 3000, dtype=np.int32).reshape(60, 100)
    (kernel,) = kernels_of(UOp.buffer(0, x.size, dtypes.int32).reshape((60, 100)).sum([0, 1]))
    assert choose_gpu_opts(kernel.ast).reduce_threads == 128
    (out, _) = emulated(kernel, [x])
    assert out.tolist() == [int(x.sum())]


def test_a_float16_cooperative_sum_accumulates_and_combines_in_float32(
    kernels_of: KernelsOf, emulated: Emulated
) -> None:
    """4096 ones: a float16 running sum would stop at 2048; partial sums and the exchange are float32."""
    (kernel,) = kernels_of(UOp.buffer(0, 4096, dtypes.float16).sum([0]))
    program = lower_gpu(kernel)
    assert {u.dtype for u in program.uops if u.op is Ops.SHUFFLE} == {dtypes.float32}
    (out, _) = emulated(kernel, [np.ones(4096, np.float16)])
    assert out.tolist() == [4096.0]


def test_the_reduction_threads_must_be_whole_warps(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(UOp.buffer(0, 4096).sum([0]))
    with pytest.raises(LowerError, match="whole warps, up to 1024 threads, not 48"):
        lower_gpu(kernel, GPUOpts(reduce_threads=48))


def test_a_grid_beyond_the_device_limit_is_refused(kernels_of: KernelsOf) -> None:
    """A prime number of rows along y cannot be split into blocks: more blocks than y allows."""
    (kernel,) = kernels_of(UOp.buffer(0, 2 * 65537).reshape((65537, 2)).exp())
    with pytest.raises(LowerError, match="65537 blocks along y exceed the grid's 65535"):
        lower_gpu(kernel, GPUOpts(threads=2))


def test_gpu_programs_count_the_flops_of_every_thread(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(UOp.buffer(0, 64 * 32).reshape((64, 32)) * 2.0 + 1.0)
    assert lower_gpu(kernel).flops == 2 * 64 * 32
