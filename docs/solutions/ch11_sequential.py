"""Exercise 11.1: Sequential, a module that applies its layers in order."""

from collections.abc import Callable
from typing import Any

from uopc.tensor import Tensor
from uopc.tensor.nn import Module


class Sequential(Module):
    """`Sequential(a, b, c)(x)` is `c(b(a(x)))`. Layers are modules or plain functions of one tensor.

    Keeping them in a list attribute is all it takes for `state_dict` to find their tensors, named
    `layers.0.weight`, `layers.2.bias` and so on, and for `train()`/`eval()` to reach them.
    """

    def __init__(self, *layers: Module | Callable[[Tensor], Tensor]) -> None:
        self.layers: list[Any] = list(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
