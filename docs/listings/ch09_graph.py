"""Chapter 9: a gradient is more graph. The loss of (x * w).sum() and the graph of its gradient with respect to w."""

import numpy as np

from uopc.ir import to_uir
from uopc.tensor import Tensor
from uopc.tensor.autodiff import compute_gradients

# --8<-- [start:graph]
x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
w = Tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
loss = (x * w).sum()  # w is broadcast over the rows of x
print(to_uir(loss.uop))
grads = compute_gradients(loss.uop, [x.uop, w.uop])
print(to_uir(grads[w.uop]))
loss.backward()
assert w.grad is not None
print("d loss / d w =", w.grad.numpy(), "  (the column sums of x:", x.numpy().sum(0), ")")
# --8<-- [end:graph]
