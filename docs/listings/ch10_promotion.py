"""Chapter 10: the dtype of a result. Tensors promote with the IR's promote(); Python numbers adapt, except
that a Python float makes an integer tensor float."""

import numpy as np

from uopc.tensor import Tensor

# --8<-- [start:promotion]
i = Tensor([1, 2, 3])  # Python ints: int32
f = Tensor([0.5, 1.5, 2.5])  # Python floats: float32
h = Tensor(np.ones(3, np.float16))
b = Tensor([True, False, True])

cases = {
    "i + 2": i + 2,
    "i + 2.5": i + 2.5,
    "i / 2": i / 2,
    "i // 2": i // 2,
    "b + 1": b + 1,
    "h * 2.5": h * 2.5,
    "i + h": i + h,
    "h + f": h + f,
    "i < 2.5": i < 2.5,
}
for text, t in cases.items():
    print(f"{text:8s} -> {t.dtype.name:8s} {t.numpy()}")
# --8<-- [end:promotion]
