"""Chapter 5: build the rendered C, call it on numpy arrays, and compare with numpy."""

import numpy as np

from uopc.backend.c import Program, render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

x = UOp.buffer(0, 6).reshape((2, 3))
rows = (x * 2.0 + 1.0).maximum(0.0).sum([1]).reshape((2,))
kernel = Kernel("relu_rowsum", rangeify([(UOp.buffer(1, 2), rows)]))

# --8<-- [start:run]
program = Program(render_c(linearize(kernel)), "relu_rowsum")  # gcc runs here, or the cache answers
print("parameters:", [(p.name, p.dtype.name, p.size, "const" if p.const else "written") for p in program.params])
a = np.array([[-3.0, -0.5, 2.0], [1.0, 4.0, -1.0]], dtype=np.float32)
out = np.zeros(2, dtype=np.float32)
program(a.reshape(-1), out)  # a.reshape(-1) is a view: the same 24 bytes, no copy
print("uopc: ", out)
print("numpy:", np.maximum(a * 2 + 1, 0).sum(axis=1))
# --8<-- [end:run]
