"""Chapter 6: expand_reduces turns a REDUCE into an accumulator: DEFINE_ACC, ACCUMULATE, and the END read after."""

from uopc.ir import Ops, UOp, to_uir
from uopc.lower import expand_reduces, rangeify

# --8<-- [start:before]
x = UOp.buffer(0, 12).reshape((3, 4))
kernel = rangeify([(UOp.buffer(1, 3), x.reduce(Ops.MAX, [1]).reshape((3,)))])  # the max of each row
print(to_uir(kernel), end="")
# --8<-- [end:before]
print()
# --8<-- [start:after]
print(to_uir(expand_reduces(kernel)), end="")
# --8<-- [end:after]
