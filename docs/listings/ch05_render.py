"""Chapter 5: the C that render_c writes for the relu_rowsum kernel."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

x = UOp.buffer(0, 6).reshape((2, 3))
rows = (x * 2.0 + 1.0).maximum(0.0).sum([1]).reshape((2,))
kernel = Kernel("relu_rowsum", rangeify([(UOp.buffer(1, 2), rows)]))
# --8<-- [start:render]
print(render_c(linearize(kernel)), end="")
# --8<-- [end:render]
