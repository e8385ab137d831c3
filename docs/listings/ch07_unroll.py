"""Chapter 7: unroll copies a reduce loop's body and combines the copies before accumulating."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, linearize, rangeify

# --8<-- [start:unroll]
x = UOp.buffer(0, 4 * 16).reshape((4, 16))
rowsum = rangeify([(UOp.buffer(1, 4), x.sum([1]).reshape((4,)))])  # loops: idx0 (output), ridx1 (reduce)
print(render_c(linearize(Kernel("rowsum_unroll4", rowsum, Opts(unroll={1: 4})))), end="")
# --8<-- [end:unroll]
