"""Chapter 10: a matrix product is a broadcast multiply and a sum; the plan is one reduce kernel."""

import numpy as np

from uopc.ir import to_uir
from uopc.lower import make_plan, normalize
from uopc.tensor import Tensor

# --8<-- [start:matmul]
rng = np.random.default_rng(0)
a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)

c = Tensor(a) @ Tensor(b)
print(to_uir(c.uop))
graph, _ = normalize([c.uop])
print("kernels:", [k.name for k in make_plan(graph).kernels])
print("matches numpy:", np.allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-6))
# --8<-- [end:matmul]
