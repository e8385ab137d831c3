"""Chapter 7: the shape of the C for a 4 x 4 register tile: loops, accumulators, loads per multiply-add."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, linearize, rangeify


def gemm_graph(m: int, k: int, n: int) -> UOp:
    """C = A @ B for row-major A (slot 0, m x k) and B (slot 1, k x n): reshape, expand, multiply, sum."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return (a * b).sum([2]).reshape((m, n))


def loop_body(source: str, header: str) -> list[str]:
    """The lines inside the loop whose `for` line contains `header`."""
    lines = source.splitlines()
    start = next(n for n, line in enumerate(lines) if header in line)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(n for n in range(start + 1, len(lines)) if lines[n] == " " * indent + "}")
    return [line.strip() for line in lines[start + 1 : end]]


# --8<-- [start:counts]
big = rangeify([(UOp.buffer(2, 16 * 16), gemm_graph(16, 16, 16))])
for opts in [Opts(), Opts(upcast={0: 4, 1: 4})]:
    src = render_c(linearize(Kernel("gemm", big, opts)))
    body = loop_body(src, "for (long long ridx2")
    loads, updates = sum("= data" in line for line in body), sum(line.startswith("acc") for line in body)
    print(
        f"upcast={opts.upcast!s:<14} {src.count('for (')} loops, {src.count('float acc'):>2} accumulators;",
        f"per reduce iteration {loads} loads for {updates} multiply-adds",
    )
# --8<-- [end:counts]
