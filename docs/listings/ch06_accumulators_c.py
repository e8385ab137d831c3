"""Chapter 6: the row maximum in C: the accumulator declared in the row loop, updated in the reduce loop."""

from uopc.backend.c import render_c
from uopc.ir import Ops, UOp
from uopc.lower import Kernel, linearize, rangeify

x = UOp.buffer(0, 12).reshape((3, 4))
kernel = rangeify([(UOp.buffer(1, 3), x.reduce(Ops.MAX, [1]).reshape((3,)))])
# --8<-- [start:c]
print(render_c(linearize(Kernel("rowmax", kernel))), end="")
# --8<-- [end:c]
