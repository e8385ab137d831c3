"""Chapter 9: backward() accumulates into .grad; leaves, detach, no_grad and which results track gradients."""

from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.tensor import Tensor

a = np.array([1.0, -2.0, 3.0], np.float32)


def grad(t: Tensor) -> npt.NDArray[Any]:
    assert t.grad is not None, "no gradient"
    return t.grad.numpy()


# --8<-- [start:accumulate]
x = Tensor(a, requires_grad=True)
loss = (x * x + x).sum()  # x is read three times: the three contributions add up
loss.backward()
print("after one backward:  ", grad(x), " (2x + 1)")
loss.backward()  # the same loss again: gradients accumulate, as in PyTorch
print("after two backwards: ", grad(x))
x.grad = None  # what an optimizer's zero_grad() does
# --8<-- [end:accumulate]

# --8<-- [start:tracking]
c = Tensor(a)  # requires_grad is False: a constant as far as gradients go
y = x * c
print("x * c tracks:", y.requires_grad, "  x > 0 tracks:", (x > 0).requires_grad)
print("x.detach() tracks:", x.detach().requires_grad)
with Tensor.no_grad():
    z = x * 3
print("x * 3 under no_grad tracks:", z.requires_grad)
(x * x.detach()).sum().backward()  # d/dx of x * const(x) is const(x): the detached factor is not differentiated
print("gradient through a detached factor:", grad(x))
# --8<-- [end:tracking]
