"""Chapter 16: a float32 matmul tiled through shared memory, and a float16 one on tensor cores: the opts the
mapping chooses, the CUDA it renders, the emulator's result against numpy, and ptxas's report for sm_80 and
sm_90 (registers per thread, shared memory per block, spilled bytes) where nvcc is installed."""

import shutil
import tempfile
from pathlib import Path

import numpy as np

from uopc.backend.c import numpy_dtype
from uopc.backend.cuda import GPUOpts, choose_gpu_opts, emulate, lower_gpu, ptxas_report, render_cuda
from uopc.ir import DType, UOp, dtypes
from uopc.lower import Kernel, make_plan, normalize


def matmul_kernel(m: int, k: int, n: int, dtype: DType) -> Kernel:
    a = UOp.buffer(0, m * k, dtype).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n, dtype).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    graph, _ = normalize([(a * b).sum([2]).reshape((m, n))])
    (kernel,) = make_plan(graph).kernels
    return kernel


def emulated_error(kernel: Kernel, opts: GPUOpts, m: int, k: int, n: int, dtype: DType) -> float:
    """The largest difference from numpy's float64 product of the same (rounded) inputs."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(numpy_dtype(dtype)) for s in ((m, k), (k, n)))
    program = lower_gpu(kernel, opts)
    buffers = {p.slot: np.zeros(p.size, numpy_dtype(p.dtype)) for p in program.params}
    inputs = iter([a.reshape(-1), b.reshape(-1)])
    ordered = [buffers[p.slot] if p.slot in program.written else next(inputs) for p in program.params]
    emulate(program, ordered)
    out = next(buffers[p.slot] for p in program.params if p.slot in program.written)
    want = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.abs(out.astype(np.float64).reshape(m, n) - want).max())


# --8<-- [start:tiled]
m, k, n = 64, 32, 64
kernel = matmul_kernel(m, k, n, dtypes.float32)
print(choose_gpu_opts(kernel.ast))
small = GPUOpts(tile=(32, 32, 16), thread_tile=(4, 4))  # a smaller tile than chosen, to keep the listing short
program = lower_gpu(kernel, small)
print(f"grid {program.launch.grid}, block {program.launch.block}")
print(render_cuda([program]))
print(f"largest error against numpy: {emulated_error(kernel, small, m, k, n, dtypes.float32):.2e}")
# --8<-- [end:tiled]

# --8<-- [start:tensor-cores]
half = matmul_kernel(m, k, n, dtypes.float16)
opts = choose_gpu_opts(half.ast)
print(opts)
print(f"largest error against numpy: {emulated_error(half, opts, m, k, n, dtypes.float16):.2e}")
# --8<-- [end:tensor-cores]

# --8<-- [start:ptxas]
sizes = (1024, 1024, 1024)
big = [lower_gpu(Kernel(f"gemm_{dt.name}", matmul_kernel(*sizes, dt).ast)) for dt in (dtypes.float32, dtypes.float16)]
if shutil.which("nvcc") is None:
    print("nvcc is not on PATH: no ptxas report")
else:
    for arch in ("sm_80", "sm_90"):
        with tempfile.TemporaryDirectory() as folder:
            for r in ptxas_report(render_cuda(big), arch, Path(folder)):
                used = f"{r.registers} registers, {r.shared_bytes} bytes of shared memory"
                print(f"{r.name:14s} {arch}: {used}, {r.spill_bytes} spilled")
# --8<-- [end:ptxas]
