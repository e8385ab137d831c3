"""Chapter 5: a shaped graph, and the kernel rangeify makes of it: loops, loads and a store."""

from uopc.ir import UOp, to_uir
from uopc.lower import Kernel, rangeify

# --8<-- [start:kernel]
x = UOp.buffer(0, 6).reshape((2, 3))  # six floats in slot 0, seen as a 2 x 3 matrix
rows = (x * 2.0 + 1.0).maximum(0.0).sum([1]).reshape((2,))  # relu(2x + 1), summed along each row
kernel = Kernel("relu_rowsum", rangeify([(UOp.buffer(1, 2), rows)]))  # written into slot 1
print(to_uir(kernel.ast), end="")
# --8<-- [end:kernel]
