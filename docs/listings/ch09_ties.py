"""Chapter 9: where max is not differentiable (ties), the gradient is shared equally."""

import numpy as np

from uopc.tensor import Tensor

# --8<-- [start:ties]
x = Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]], np.float32), requires_grad=True)
x.max(1).sum().backward()
assert x.grad is not None
print("x.max(1): gradient\n", x.grad.numpy())

a = Tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
b = Tensor(np.array([3.0, 2.0, 1.0], np.float32), requires_grad=True)
a.maximum(b).sum().backward()
assert a.grad is not None and b.grad is not None
print("a.maximum(b): gradient of a", a.grad.numpy(), " of b", b.grad.numpy())
# --8<-- [end:ties]
