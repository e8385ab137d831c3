"""Optimizers: SGD with momentum, Adam, and AdamW with decoupled weight decay.

`step()` builds every parameter's update as one lazy graph and realizes them all together, so a training
step is one plan. The learning rate and Adam's step count are one-element tensors, not Python constants: a
constant is compiled into the kernels, so a new value would need a new plan every step.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from uopc.tensor.errors import TensorError
from uopc.tensor.realize import buffer_node, realizer
from uopc.tensor.tensor import Tensor

State = tuple[Tensor, ...]


def _zeros(p: Tensor) -> Tensor:
    """Zeros in a buffer, so the first step's graph has the same structure as every later one."""
    return Tensor(np.zeros(p.shape, dtype=p.dtype.np_name), device=p.device)


def _scalar(value: float, device: str) -> Tensor:
    """A 0-d float32 tensor held in a buffer: a plan input, not a compiled-in constant."""
    return Tensor([value], device=device).reshape(())


def _nonnegative(**values: float) -> None:
    """Refuse a negative (or NaN) learning rate, momentum, eps or weight decay, as torch.optim does."""
    for name, value in values.items():
        if not value >= 0.0:
            raise TensorError(f"optimizer: {name} must be >= 0, got {value}")


class Optimizer(abc.ABC):
    """Holds the parameters; `zero_grad()` clears their gradients, `step()` updates them in one plan."""

    def __init__(self, params: Sequence[Tensor], lr: float) -> None:
        self.params = list(params)
        if not self.params:
            raise TensorError("optimizer: got no parameters")
        untracked = [p.shape for p in self.params if not p.requires_grad]
        if untracked:
            raise TensorError(f"optimizer: parameters of shapes {untracked} do not have requires_grad")
        if len({id(p) for p in self.params}) != len(self.params):  # each copy would be updated from the old value
            raise TensorError("optimizer: a parameter is listed more than once")
        self.device = self.params[0].device
        self.lr = lr
        self.state: list[State] = [self.init_state(p) for p in self.params]

    @property
    def lr(self) -> float:
        return float(self.lr_tensor.item())

    @lr.setter
    def lr(self, value: float) -> None:
        """A new learning rate is new data for the same plan, in the same buffer: a captured step (capture.py)
        reads that buffer at every replay, so a schedule set between calls reaches the replayed kernels."""
        _nonnegative(lr=value)
        fresh = _scalar(value, self.device)
        if not hasattr(self, "lr_tensor"):
            self.lr_tensor = fresh
            return
        old, new = buffer_node(self.lr_tensor.uop), buffer_node(fresh.uop)
        assert old is not None and new is not None, "both are buffers given a shape"
        realizer.buffers[old] = realizer.buffers[new]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self, *extra: Tensor) -> None:
        """Update every parameter that has a gradient. `extra` tensors (the loss, say) are computed in the
        same plan, so the forward pass is not run a second time to read them."""
        todo = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not todo:  # no gradients yet: nothing to update, and Adam's step count must not advance
            if extra:
                Tensor.realize(*extra)
            return
        with Tensor.no_grad():
            shared = self.begin_step()
            updates = [self._update_one(i) for i in todo]
        Tensor.realize(*shared, *(new for new, _ in updates), *(s for _, st in updates for s in st), *extra)
        for i, (new, st) in zip(todo, updates, strict=True):
            self.params[i].uop = new.uop
            self.state[i] = st
        self.end_step(shared)

    def _update_one(self, i: int) -> tuple[Tensor, State]:
        p = self.params[i]
        new, state = self.update(p, p.grad, self.state[i])  # type: ignore[arg-type]
        return new.cast(p.dtype), state  # the float32 learning rate must not make a float16 parameter float32

    def init_state(self, p: Tensor) -> State:
        return ()

    def begin_step(self) -> list[Tensor]:
        """Values shared by every parameter's update (Adam's step count); computed in the step's plan."""
        return []

    def end_step(self, shared: list[Tensor]) -> None:  # noqa: B027 - a hook: most optimizers share nothing
        """Adopt the shared values computed by the step."""

    @abc.abstractmethod
    def update(self, p: Tensor, g: Tensor, state: State) -> tuple[Tensor, State]:
        """The new value of parameter p with gradient g, and its new state."""


class SGD(Optimizer):
    """p -= lr * b, with b = momentum * b + (g + weight_decay * p) (b = g when momentum is 0), as in PyTorch."""

    def __init__(self, params: Sequence[Tensor], lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0):
        _nonnegative(momentum=momentum, weight_decay=weight_decay)
        self.momentum, self.weight_decay = momentum, weight_decay
        super().__init__(params, lr)

    def init_state(self, p: Tensor) -> State:
        return (_zeros(p),) if self.momentum else ()

    def update(self, p: Tensor, g: Tensor, state: State) -> tuple[Tensor, State]:
        if self.weight_decay:
            g = g + self.weight_decay * p
        if not self.momentum:
            return p - self.lr_tensor * g, ()
        b = self.momentum * state[0] + g
        return p - self.lr_tensor * b, (b,)


class Adam(Optimizer):
    """Adam with bias correction; weight_decay adds weight_decay * p to the gradient (L2), as torch.optim.Adam.

    One step count serves every parameter (torch keeps one per parameter): the two differ only for a
    parameter that had no gradient in some steps, whose bias correction then runs ahead of its moments.
    """

    decoupled = False

    def __init__(
        self,
        params: Sequence[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        _nonnegative(eps=eps, weight_decay=weight_decay)
        if not all(0.0 <= b < 1.0 for b in betas):
            raise TensorError(f"optimizer: betas must lie in [0, 1), got {betas}")
        (self.b1, self.b2), self.eps, self.weight_decay = betas, eps, weight_decay
        super().__init__(params, lr)
        self.t = _scalar(0.0, self.device)

    def init_state(self, p: Tensor) -> State:
        return (_zeros(p), _zeros(p))

    def begin_step(self) -> list[Tensor]:
        t = self.t + 1.0
        self.bias1, self.bias2 = 1.0 - self.b1**t, 1.0 - self.b2**t
        return [t]

    def end_step(self, shared: list[Tensor]) -> None:
        self.t = shared[0]

    def update(self, p: Tensor, g: Tensor, state: State) -> tuple[Tensor, State]:
        if self.weight_decay and not self.decoupled:
            g = g + self.weight_decay * p
        if self.weight_decay and self.decoupled:
            p = p - self.lr_tensor * self.weight_decay * p
        m = self.b1 * state[0] + (1.0 - self.b1) * g
        v = self.b2 * state[1] + (1.0 - self.b2) * g.square()
        step = (m / self.bias1) / ((v / self.bias2).sqrt() + self.eps)
        return p - self.lr_tensor * step, (m, v)


class AdamW(Adam):
    """Adam with decoupled weight decay: p -= lr * weight_decay * p before the Adam step, as torch.optim.AdamW."""

    decoupled = True

    def __init__(
        self,
        params: Sequence[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)
