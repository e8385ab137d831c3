"""The CUDA renderer: readable kernels named as the C renderer names, and CUDA that nvcc compiles.

The compile tests need nvcc (CUDA 13 is on the development and CI machines; no GPU is): each renders a
plan's kernels into one file and builds it for sm_80, the oldest architecture the tensor-core kernels
target. Where nvcc is missing they are skipped and say so.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable

import numpy as np
import pytest

from uopc.backend.c import RenderError, render_kernel
from uopc.backend.cuda import GPUOpts, build_cubin, lower_gpu, render_cuda, render_cuda_kernel
from uopc.ir import Ops, UOp, dtypes
from uopc.lower import Kernel, linearize

KernelsOf = Callable[..., list[Kernel]]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH: no compile check here")


def declared(source: str) -> list[str]:
    """The names a function declares, in order: val0, alu1, acc0, ..."""
    return re.findall(r"\b(?:float|int|double|bool|long long) ((?:val|alu|acc)\d+) =", source)


def test_a_kernel_reads_as_its_c_with_the_outer_loops_replaced_by_the_threads(kernels_of: KernelsOf) -> None:
    """Side by side: the same loads, accumulators and computed values under the same names; where C loops
    over idx0 and idx1, each CUDA thread reads its position from blockIdx and threadIdx."""
    (kernel,) = kernels_of((UOp.buffer(0, 512 * 48).reshape((512, 48)) * 2.0 + 1.0).exp().sum([1]))
    c, _ = render_kernel(linearize(Kernel(kernel.name, kernel.ast)))  # the C without the CPU's opts
    cuda, _ = render_cuda_kernel(lower_gpu(kernel, GPUOpts()))
    assert declared(c) == declared(cuda) == ["acc0", "alu0", "val0"]
    assert "for (long long idx0 = 0; idx0 < 512; idx0++)" in c and "long long alu0 = (idx0*48);" in c
    assert "const int gidx0 = blockIdx.x;" in cuda and "const int lidx0 = threadIdx.x;" in cuda
    assert "int alu0 = ((gidx0*12288)+(lidx0*48));" in cuda and "data0[((gidx0*256)+lidx0)] = acc0;" in cuda
    assert "for (int ridx2 = 0; ridx2 < 48; ridx2++)" in cuda
    assert "for (long long ridx2_base = 0; ridx2_base < 48; ridx2_base += 8)" in c  # the CPU adds a long sum in lanes
    assert cuda.startswith(f'extern "C" __global__ void __launch_bounds__(256) {kernel.name}(')
    assert "float* __restrict__ data0, const float* __restrict__ data1)" in cuda


def test_a_cooperative_reduction_shows_its_shuffles_shared_memory_and_barrier(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(UOp.buffer(0, 4 * 4096).reshape((4, 4096)).sum([1]))
    cuda, _ = render_cuda_kernel(lower_gpu(kernel))
    assert "__shared__ float smem0[256];" in cuda
    assert cuda.count("__shfl_sync(0xffffffffu, ") == 5 and cuda.count("__syncthreads();") == 1
    assert "for (int ridx2 = 0; ridx2 < 16; ridx2++)" in cuda  # each thread's part: 4096 / 256 elements


def test_sums_of_products_fuse_and_nothing_else_does(kernels_of: KernelsOf) -> None:
    """fmaf only in an accumulation of products; a product that is stored stays a product."""
    a, b = UOp.buffer(0, 8 * 16).reshape((8, 16)), UOp.buffer(1, 16 * 8).reshape((16, 8))
    products = a.reshape((8, 16, 1)).expand((8, 16, 8)) * b.reshape((1, 16, 8)).expand((8, 16, 8))
    (matmul,) = kernels_of(products.sum([1]))
    cuda, _ = render_cuda_kernel(lower_gpu(matmul, GPUOpts()))
    assert re.search(r"acc0 = fmaf\(val\d, val\d, acc0\);", cuda)
    (scaled,) = kernels_of(a * 2.0 + 1.0)
    assert "fmaf" not in render_cuda_kernel(lower_gpu(scaled))[0]


def test_16_bit_floats_widen_on_load_narrow_on_store_and_round_after_each_op(kernels_of: KernelsOf) -> None:
    for dtype, widen, narrow, rounding in [
        (dtypes.float16, "__half2float", "__float2half_rn", "f16_round"),
        (dtypes.bfloat16, "__bfloat162float", "__float2bfloat16_rn", "bf16_round"),
    ]:
        (kernel,) = kernels_of(UOp.buffer(0, 64, dtype) * UOp.const(3.0, dtype) + UOp.const(1.0, dtype))
        source = render_cuda([lower_gpu(kernel)])
        assert f"{widen}(data1[" in source and f"data0[lidx0] = {narrow}(" in source
        assert f"{rounding}(({rounding}((val0*3.0f))+1.0f))" in source
        assert f"static __device__ inline float {rounding}(float x)" in source


def test_the_renderer_refuses_a_program_not_mapped_for_a_gpu(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(UOp.buffer(0, 8) + 1.0)
    with pytest.raises(RenderError, match="takes GPU programs"):
        render_cuda([linearize(kernel)])


def _plan_of_every_kind(kernels_of: KernelsOf) -> list[Kernel]:
    """Kernels of every dtype the renderer spells, elementwise, reducing per thread and cooperatively."""
    out: list[Kernel] = []
    for dtype in [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int32, dtypes.int8]:
        x = UOp.buffer(0, 96 * 40, dtype).reshape((96, 40))
        y = x.maximum(x * UOp.const(2, dtype)) if dtype.is_int else (x.exp() - x).sqrt()
        out += kernels_of(y.sum([1]), (x // UOp.const(3, dtype)) if dtype.is_int else x.sin())
        out += kernels_of(x.reshape((3840,)).reduce(Ops.MAX, [0]))
    return [Kernel(f"k{i}_{k.name}", k.ast) for i, k in enumerate(out)]


@needs_nvcc
def test_nvcc_compiles_kernels_of_every_dtype(kernels_of: KernelsOf) -> None:
    programs = [lower_gpu(k) for k in _plan_of_every_kind(kernels_of)]
    binary = build_cubin(render_cuda(programs), "sm_80")
    assert binary.data[:4] == b"\x7fELF"  # a cubin is an ELF file of the GPU's code
    for p in programs:
        assert p.name.encode() in binary.data


@needs_nvcc
def test_a_cubin_is_built_once(kernels_of: KernelsOf) -> None:
    (kernel,) = kernels_of(UOp.buffer(0, 256) * np.float32(3.0).item())
    source = render_cuda([lower_gpu(kernel)])
    first = build_cubin(source, "sm_90")
    assert build_cubin(source, "sm_90") == first
    assert build_cubin(source, "sm_80").key != first.key  # the architecture is part of the key


def test_float_floor_division_and_modulo_render_numpys_helpers(kernels_of: KernelsOf) -> None:
    """Of floats, // and % are numpy's (the C backend's helpers, fmod's exact remainder); a helper per dtype."""
    x, y = UOp.buffer(0, 64), UOp.buffer(1, 64)
    (kernel,) = kernels_of((x // y) + (x % y))
    source = render_cuda([lower_gpu(kernel)])
    assert "static __device__ inline float floordiv_f32(float a, float b) { if (b == 0) return a / b;" in source
    assert "static __device__ inline float floormod_f32(float a, float b) { float m = fmodf(a, b);" in source
