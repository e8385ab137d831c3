"""Chapter 6: a threaded GEMM declares its accumulator inside the parallel loop; the mutant that does not races."""

import difflib

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, linearize, rangeify


def gemm_graph(m: int, k: int, n: int) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


# --8<-- [start:threaded]
kernel = Kernel("gemm", rangeify([(UOp.buffer(2, 64 * 64), gemm_graph(64, 64, 64))]), Opts(thread=0))
source = render_c(linearize(kernel))
# --8<-- [end:threaded]
# --8<-- [start:mutant]
# The bug to avoid, made by hand: declare acc0 once, at the top of the function, and only reset it in the loop.
lines = source.splitlines()
mutant = [line.replace("float acc0 =", "acc0 =") for line in lines]
mutant.insert(next(n for n, line in enumerate(lines) if "void gemm(" in line) + 1, "  float acc0;")
print("\n".join(difflib.unified_diff(lines, mutant, "generated", "mutant", n=2, lineterm="")))
# --8<-- [end:mutant]
