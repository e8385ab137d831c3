"""Chapter 7: upcast makes a register tile: a 2 x 2 tile of a matmul in C, sharing one reduce loop."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, linearize, rangeify


def gemm_graph(m: int, k: int, n: int) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


# --8<-- [start:tile]
gemm = rangeify([(UOp.buffer(2, 8 * 8), gemm_graph(8, 8, 8))])  # loops: idx0, idx1 (outputs), ridx2 (reduce)
print(render_c(linearize(Kernel("gemm_2x2", gemm, Opts(upcast={0: 2, 1: 2})))), end="")
# --8<-- [end:tile]
