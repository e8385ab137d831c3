"""Chapter 5: division of loop indices, which are never negative, is C's own / and %: no helper."""

from uopc.backend.c import render_c
from uopc.ir import UOp, dtypes
from uopc.lower import Kernel, linearize, rangeify

# --8<-- [start:index-division]
transposed = UOp.buffer(0, 24, dtypes.int32).reshape((4, 6)).permute((1, 0)).reshape((24,))
print(render_c(linearize(Kernel("transpose_flat", rangeify([(UOp.buffer(1, 24, dtypes.int32), transposed)])))), end="")
# --8<-- [end:index-division]
