"""Chapter 7: PAD needs a gated load (never read outside the buffer) and a WHERE (padding is 0, even after exp)."""

import numpy as np

from uopc.backend.c import Program, render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, rangeify

# --8<-- [start:pad]
x = UOp.buffer(0, 6).reshape((2, 3))
padded = x.exp().pad(((0, 0), (1, 1)))  # exp first, then a zero column on each side: shape (2, 5)
kernel = Kernel("pad_exp", rangeify([(UOp.buffer(1, 10), padded)]))
source = render_c(linearize(kernel))
print(source)
a = np.log(np.arange(1, 7, dtype=np.float32)).reshape(2, 3)  # exp(a) is 1..6
out = np.zeros(10, dtype=np.float32)
Program(source, "pad_exp")(a.reshape(-1), out)
want = np.pad(np.exp(a), ((0, 0), (1, 1)))
print("uopc:", np.array2string(out.reshape(2, 5), precision=3, prefix="uopc: "))
print("matches numpy's np.pad(np.exp(a), ...):", np.allclose(out.reshape(2, 5), want, rtol=1e-6))
print("the gated load alone would put exp(0) =", np.exp(np.float32(0)), "in the padding")
# --8<-- [end:pad]
