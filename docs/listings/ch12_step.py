"""Chapter 12: one MNIST training step (784-256-10 MLP, AdamW, batch 128) on random data: how big its graph is,
which kernels its plan runs, and where the floating-point work is. No timings: those vary by machine."""

import numpy as np

from uopc.tensor import Tensor, realizer
from uopc.tensor.nn import Linear, Module
from uopc.tensor.optim import AdamW


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
print(f"plans made in two steps: {realizer.plans.made}")
((graph, _, _), plan) = next(iter(realizer.plans.plans.items()))  # the key: the normalized graph of the whole step
print(f"nodes in the step's graph (forward, backward, update): {len(graph.toposort()):,}")
programs = realizer.compiled[plan]["C"].programs  # the plan's kernels as the C backend got them
total = sum(p.flops for p in programs)
print(f"{len(programs)} kernels, {total / 1e6:.1f} MFLOP per step; the five biggest:")
for p in sorted(programs, key=lambda p: -p.flops)[:5]:
    print(f"  {p.name:14s} {p.flops / 1e6:7.2f} MFLOP  {100 * p.flops / total:5.1f}%")
# --8<-- [end:step]
