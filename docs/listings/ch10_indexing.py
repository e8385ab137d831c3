"""Chapter 10: slicing with a step, from shrink, pad, reshape and shrink again; checked against numpy."""

import numpy as np

from uopc.ir import to_uir
from uopc.tensor import Tensor

# --8<-- [start:step]
a = np.arange(7, dtype=np.float32)
x = Tensor(a)
print(to_uir(x[1::3].uop))
print(x[1::3].numpy(), "numpy:", a[1::3])
# --8<-- [end:step]

# --8<-- [start:mixed]
b = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
t = Tensor(b)
for text, got, want in [
    ("t[1]", t[1], b[1]),
    ("t[:, ::-1]", t[:, ::-1], b[:, ::-1]),
    ("t[..., 1:3]", t[..., 1:3], b[..., 1:3]),
    ("t[0, None, ::2, -1]", t[0, None, ::2, -1], b[0, None, ::2, -1]),
]:
    ok = got.shape == want.shape and np.array_equal(got.numpy(), want)
    print(f"{text:20s} shape {got.shape!s:10s} equal to numpy: {ok}")
# --8<-- [end:mixed]
