"""Exercise 11.2: RMSprop as an Optimizer: one rule, state in buffers, the learning rate as a tensor."""

from collections.abc import Sequence

import numpy as np

from uopc.tensor import Tensor
from uopc.tensor.optim import Optimizer, State


class RMSprop(Optimizer):
    """v = alpha * v + (1 - alpha) * g^2;  p -= lr * g / (sqrt(v) + eps), as torch.optim.RMSprop (no momentum).

    The running average starts as a buffer of zeros (not a lazy Tensor.zeros), so that the first step's
    graph has the structure of every later one: one plan for the whole run.
    """

    def __init__(self, params: Sequence[Tensor], lr: float = 0.01, alpha: float = 0.99, eps: float = 1e-8) -> None:
        self.alpha, self.eps = alpha, eps
        super().__init__(params, lr)

    def init_state(self, p: Tensor) -> State:
        return (Tensor(np.zeros(p.shape, dtype=p.dtype.np_name), device=p.device),)

    def update(self, p: Tensor, g: Tensor, state: State) -> tuple[Tensor, State]:
        v = self.alpha * state[0] + (1.0 - self.alpha) * g.square()
        return p - self.lr_tensor * g / (v.sqrt() + self.eps), (v,)
