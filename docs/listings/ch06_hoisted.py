"""Chapter 6: the C of out[i, j] = x[i] * y[i, j]: x[i] is read in the outer loop, once per row."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))
y = UOp.buffer(1, 12).reshape((3, 4))
# --8<-- [start:c]
print(render_c(linearize(Kernel("scale_rows", rangeify([(UOp.buffer(2, 12), x * y)])))), end="")
# --8<-- [end:c]
