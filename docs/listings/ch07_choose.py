"""Chapter 7: what choose_opts picks for matmuls of several sizes, and for a large elementwise kernel."""

from uopc.ir import UOp
from uopc.lower import choose_opts, rangeify


def gemm_graph(m: int, k: int, n: int) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


# --8<-- [start:choose]
for m, k, n in [(4, 4, 4), (8, 8, 8), (30, 30, 30), (64, 64, 64), (512, 512, 512)]:
    print(f"gemm {m} x {k} x {n}:".ljust(22), choose_opts(rangeify([(UOp.buffer(2, m * n), gemm_graph(m, k, n))])))
x = UOp.buffer(0, 1 << 20)
print("elementwise 2**20:".ljust(22), choose_opts(rangeify([(UOp.buffer(1, 1 << 20), x * 2.0)])))
# --8<-- [end:choose]
