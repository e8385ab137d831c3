"""Chapter 5: C's / truncates, the IR's IDIV floors. Helpers appear only where bounds cannot rule out a sign."""

import math

import numpy as np

from uopc.backend.c import Program, render_c
from uopc.ir import UOp, dtypes
from uopc.lower import Kernel, rangeify

# --8<-- [start:c-truncates]
print("C:      -7 / 2 =", int(-7 / 2), "  -7 % 2 =", int(math.fmod(-7, 2)))  # what C computes
print("the IR: -7 // 2 =", -7 // 2, "  -7 % 2 =", -7 % 2)  # floor division, as in Python and numpy
# --8<-- [end:c-truncates]
print()
# --8<-- [start:data-division]
x = UOp.buffer(0, 6, dtypes.int32)
value = x // 2 + x % 3  # x is data: it may be negative
kernel = Kernel("halves", rangeify([(UOp.buffer(1, 6, dtypes.int32), value)]))
source = render_c(kernel)
print(source)
data = np.array([-7, -6, -1, 0, 5, 7], dtype=np.int32)
out = np.zeros(6, dtype=np.int32)
Program(source, "halves")(data, out)
print("uopc: ", out)
print("numpy:", data // 2 + data % 3)
# --8<-- [end:data-division]
print()
# --8<-- [start:index-division]
transposed = UOp.buffer(0, 24, dtypes.int32).reshape((4, 6)).permute((1, 0)).reshape((24,))
print(render_c(Kernel("transpose_flat", rangeify([(UOp.buffer(1, 24, dtypes.int32), transposed)]))), end="")
# --8<-- [end:index-division]
