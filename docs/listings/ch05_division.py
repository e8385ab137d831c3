"""Chapter 5: division of data, which may be negative, calls the floor helpers; the answers match numpy."""

import numpy as np

from uopc.backend.c import Program, render_c
from uopc.ir import UOp, dtypes
from uopc.lower import Kernel, linearize, rangeify

# --8<-- [start:data-division]
x = UOp.buffer(0, 6, dtypes.int32)
value = x // 2 + x % 3  # x is data: it may be negative
kernel = Kernel("halves", rangeify([(UOp.buffer(1, 6, dtypes.int32), value)]))
source = render_c(linearize(kernel))
print(source)
data = np.array([-7, -6, -1, 0, 5, 7], dtype=np.int32)
out = np.zeros(6, dtype=np.int32)
Program(source, "halves")(data, out)
print("uopc: ", out)
print("numpy:", data // 2 + data % 3)
# --8<-- [end:data-division]
