"""Chapter 8: which nodes kernelize materializes, and how they group into kernels, for four small programs."""

import numpy as np

from uopc.ir import Ops
from uopc.lower import make_plan, materialized, normalize
from uopc.tensor import Tensor

rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal((4, 6)).astype(np.float32))
w = Tensor(rng.standard_normal((6, 5)).astype(np.float32))
y = Tensor(rng.standard_normal((4, 6)).astype(np.float32))

# --8<-- [start:programs]
g = x @ w  # a gradient, say: a reduction that three optimizer outputs read
programs = {
    "softmax": [x.softmax(1)],
    "relu then matmul": [x.relu() @ w],
    "three outputs of one reduction": [g * 0.1, g * g * 0.01, g - 1.0],
    "two elementwise outputs": [x * 0.9 + y * 0.1, (y * y).sqrt()],
}
for name, tensors in programs.items():
    graph, inputs = normalize([t.uop for t in tensors])
    chosen = ", ".join(f"{u.op.name.lower()} {u.shape}" for u in materialized(graph))
    plan = make_plan(graph, opt=False)
    print(f"{name}: {len(inputs)} inputs; materialized: {chosen}")
    for step in plan.steps:
        kernel = plan.kernels[step.kernel]
        stores = sum(1 for u in kernel.ast.toposort() if u.op is Ops.STORE)
        print(f"  {kernel.name:10s} {stores} store(s), plan buffers {step.buffers}")
# --8<-- [end:programs]
