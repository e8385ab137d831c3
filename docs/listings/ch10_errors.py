"""Chapter 10: mistakes fail at the call that made them, with a TensorError that names the op and the shapes."""

from collections.abc import Callable

import numpy as np

from uopc.tensor import Tensor, TensorError

# --8<-- [start:errors]
x = Tensor(np.ones((4, 5), np.float32))
w = Tensor(np.ones((4, 3), np.float32))
labels = Tensor(np.array([0, 1, 2, 7], np.int32))

attempts: dict[str, Callable[[], object]] = {
    "x + w": lambda: x + w,
    "x @ w": lambda: x @ w,
    "x.reshape(3, -1)": lambda: x.reshape(3, -1),
    "x.sum((1, -1))": lambda: x.sum((1, -1)),
    "x[4]": lambda: x[4],
    "x.cross_entropy(labels)": lambda: x.cross_entropy(labels),
    "x.sum(1).backward()": lambda: x.sum(1).backward(),
}
for text, attempt in attempts.items():
    try:
        attempt()
    except TensorError as e:
        print(f"{text:24s} {type(e).__name__}: {e}")
# --8<-- [end:errors]
