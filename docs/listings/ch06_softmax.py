"""Chapter 6: softmax of each row in one kernel: two reductions and an output loop inside the row loop."""

from uopc.backend.c import render_c
from uopc.ir import Ops, UOp
from uopc.lower import Kernel, linearize, rangeify

# --8<-- [start:softmax]
x = UOp.buffer(0, 12).reshape((3, 4))
e = (x - x.reduce(Ops.MAX, [1]).expand((3, 4))).exp()  # subtract each row's max: exp cannot overflow
softmax = e / e.sum([1]).expand((3, 4))
kernel = Kernel("softmax", rangeify([(UOp.buffer(1, 12), softmax)]))
print(render_c(linearize(kernel)), end="")
# --8<-- [end:softmax]
