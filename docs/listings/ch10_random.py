"""Chapter 10: random tensors come from one seeded numpy generator, so a seed repeats a whole run."""

import numpy as np

from uopc.tensor import Tensor

np.set_printoptions(precision=4, suppress=True)

# --8<-- [start:random]
Tensor.manual_seed(0)
first = [Tensor.rand(3).numpy(), Tensor.randn(2, 2).numpy()]
Tensor.manual_seed(0)
again = [Tensor.rand(3).numpy(), Tensor.randn(2, 2).numpy()]
print("rand(3): ", first[0])
print("same values after manual_seed(0) again:", all(np.array_equal(a, b) for a, b in zip(first, again, strict=True)))
print("uniform(2, low=-1, high=1):", Tensor.uniform(2, low=-1.0, high=1.0).numpy())
# --8<-- [end:random]
