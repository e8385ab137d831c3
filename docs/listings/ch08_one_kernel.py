"""Chapter 8: why not one kernel? Floating-point work of a whole program in one loop nest, against kernelize's plan."""

import numpy as np

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import Kernel, linearize, make_plan, normalize, rangeify
from uopc.tensor import Tensor


# --8<-- [start:compare]
def one_kernel(root: UOp) -> Kernel:
    """The whole (normalized) graph lowered as a single kernel, with nothing materialized."""
    return Kernel("one", rangeify([(UOp.buffer(1, root.size), root)]))


n = 64
x = Tensor(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
programs = {
    "softmax over rows": x.softmax(1),
    "centre columns, sum rows": (x - x.mean(0)).square().sum(1),
    "relu, then matmul": x.relu() @ x,
}
for name, t in programs.items():
    graph, _ = normalize([t.uop])
    plan = make_plan(graph, opt=False)
    planned = sum(linearize(k).flops for k in plan.kernels)
    alone = linearize(one_kernel(graph.src[0])).flops
    print(f"{name:26s} one kernel {alone:>7,} flops   plan {planned:>7,} flops in {len(plan.kernels)} kernels")
# --8<-- [end:compare]

print()
# --8<-- [start:nested]
small = Tensor(np.ones((4, 4), np.float32))
graph, _ = normalize([(small - small.mean(0)).square().sum(1).uop])
print(render_c(linearize(one_kernel(graph.src[0]))))
# --8<-- [end:nested]
