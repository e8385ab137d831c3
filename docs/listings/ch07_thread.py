"""Chapter 7: thread makes an output loop the outermost one, run as an OpenMP parallel for."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, linearize, rangeify


def gemm_graph(m: int, k: int, n: int) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


# --8<-- [start:thread]
gemm = rangeify([(UOp.buffer(2, 64 * 32), gemm_graph(64, 16, 32))])  # loops: idx0 < 64, idx1 < 32, ridx2 < 16
print(render_c(linearize(Kernel("gemm_threads", gemm, Opts(thread=1)))), end="")
# --8<-- [end:thread]
