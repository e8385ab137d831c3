"""Chapter 9: reading a value before backward() keeps the graph; realized tensors that track nothing become buffers."""

import numpy as np

from uopc.tensor import Tensor, realizer

a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)

# --8<-- [start:realized]
x = Tensor(a, requires_grad=True)
h = x * 2
loss = (h * h).sum()
print("loss.item() =", loss.item())  # computes the loss now ...
graph, value = loss.uop, realizer.computed[loss.uop]
print(f"loss.uop is still {graph.op.name} of {graph.src[0].op.name};", end=" ")
print(f"its value: {value.op.name} of {value.src[0].op.name}")
loss.backward()  # ... and backward() still finds x through the graph
assert x.grad is not None
print("x.grad =", x.grad.numpy().tolist(), " (8x)")

c = Tensor(a) * 2  # tracks no gradient
c.realize()
print(f"c tracks nothing, so realize replaced its graph: c.uop is {c.uop.op.name} of {c.uop.src[0].op.name}")
# --8<-- [end:realized]
