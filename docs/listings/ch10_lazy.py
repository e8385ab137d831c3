"""Chapter 10: a tensor is a graph plus a device. Operations build graph; numpy() realizes it."""

import numpy as np

from uopc.ir import to_uir
from uopc.tensor import Tensor, realizer

# --8<-- [start:lazy]
x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
print(x, "holds", to_uir(x.uop), sep="\n")
y = (x * 2 + 1).relu().sum(1)
print(y, "holds", to_uir(y.uop), sep="\n")
print("plans made so far:", realizer.plans.made)
print(y.numpy(), "after numpy(), plans made:", realizer.plans.made)
print("y now holds", to_uir(y.uop), sep="\n")
# --8<-- [end:lazy]
