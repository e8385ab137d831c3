"""Chapter 7: a reduction opens a new loop per reduced axis, numbered after the output axes."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

# --8<-- [start:reduce]
x = UOp.buffer(0, 2 * 3 * 5).reshape((2, 3, 5))
total = x.sum([0, 2])  # shape (1, 3, 1): the reduced axes keep size 1
print(render_c(linearize(Kernel("sum_0_2", rangeify([(UOp.buffer(1, 3), total)])))), end="")
# --8<-- [end:reduce]
