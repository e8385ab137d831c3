"""Chapter 12: one MNIST training step (784-256-10 MLP, AdamW, batch 128) on random data: how big its graph is,
which kernels its plan runs, and where the floating-point work is. No timings: those vary by machine."""

import numpy as np

from uopc.tensor import Tensor
from uopc.tensor.nn import Linear, Module
from uopc.tensor.optim import AdamW
from uopc.tensor.realize import PLANS


class MLP(Module):
    def __init__(self) -> None:
        self.l1 = Linear(784, 256)
        self.l2 = Linear(256, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


# --8<-- [start:step]
Tensor.manual_seed(0)
rng = np.random.default_rng(0)
model = MLP()
opt = AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
for _ in range(2):
    x = Tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, 128).astype(np.int32))
    loss = model(x).cross_entropy(y)
    opt.zero_grad()
    loss.backward()
    opt.step(loss)
print(f"plans made in two steps: {PLANS.made}")
((graph, _), plan) = next(iter(PLANS.plans.items()))  # the key is the normalized graph of the whole step
print(f"nodes in the step's graph (forward, backward, update): {len(graph.toposort()):,}")
total = sum(k.flops for k in plan.kernels)
print(f"{len(plan.kernels)} kernels, {total / 1e6:.1f} MFLOP per step; the five biggest:")
for k in sorted(plan.kernels, key=lambda k: -k.flops)[:5]:
    print(f"  {k.name:14s} {k.flops / 1e6:7.2f} MFLOP  {100 * k.flops / total:5.1f}%")
# --8<-- [end:step]
