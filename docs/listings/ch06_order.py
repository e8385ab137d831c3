"""Chapter 6: a kernel graph has only a topological order, and one END that says which loops close."""

from uopc.ir import UOp, to_uir
from uopc.lower import rangeify

# --8<-- [start:kernel]
x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))  # x[i], the same for every j
y = UOp.buffer(1, 12).reshape((3, 4))
kernel = rangeify([(UOp.buffer(2, 12), x * y)])  # out[i, j] = x[i] * y[i, j]
print(to_uir(kernel), end="")
# --8<-- [end:kernel]
