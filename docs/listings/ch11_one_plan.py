"""Chapter 11: a training step is one plan, reused by every later step, while the learning rate changes;
the same optimizer with the learning rate as a Python float compiles a plan per step."""

import numpy as np

from uopc.tensor import Tensor, realizer
from uopc.tensor.nn import Linear, Module
from uopc.tensor.optim import SGD, AdamW, Optimizer, State


class MLP(Module):
    def __init__(self) -> None:
        self.l1 = Linear(6, 16)
        self.l2 = Linear(16, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


# --8<-- [start:float-lr]
class FloatLRSGD(SGD):
    """SGD with the learning rate compiled in as a Python float: what optimizers must not do."""

    def update(self, p: Tensor, g: Tensor, state: State) -> tuple[Tensor, State]:
        return p - self.lr * g, ()  # self.lr is a float (read back from the lr tensor)


# --8<-- [end:float-lr]


# --8<-- [start:steps]
def train(make: type[Optimizer], steps: int) -> None:
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = MLP()
    opt = make(model.parameters(), lr=0.1)
    made = []
    for step in range(steps):
        opt.lr = 0.1 / (step + 1)  # a new learning rate every step
        x = Tensor(rng.standard_normal((32, 6)).astype(np.float32))
        y = Tensor(rng.integers(0, 3, 32).astype(np.int32))
        before = realizer.plans.made
        loss = model(x).cross_entropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step(loss)  # forward, backward and update: one plan
        made.append(realizer.plans.made - before)
    plan = list(realizer.plans.plans.values())[-1]
    print(f"{make.__name__:11s} plans made per step {made}; the last step's plan has {len(plan.kernels)} kernels")


for make in (SGD, AdamW, FloatLRSGD):
    train(make, 3)
# --8<-- [end:steps]
