"""Exercise 9.1: second derivatives, by differentiating a gradient graph a second time."""

from collections.abc import Callable
from typing import Any

import numpy.typing as npt

from uopc.tensor import Tensor
from uopc.tensor.autodiff import compute_gradients


def second_derivative(f: Callable[[Tensor], Tensor], a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """f''(a), element by element, for an elementwise f.

    The gradient of sum(f(x)) is the graph f'(x); the gradient of sum(f'(x)) with respect to x_i is f''(x_i),
    because element i of f'(x) depends on x_i alone. Both are plain compute_gradients calls: a gradient is a
    graph like any other, so it can be differentiated again.
    """
    x = Tensor(a, requires_grad=True)
    first = compute_gradients(f(x).sum().uop, [x.uop])[x.uop]
    total = first.sum(list(range(len(first.shape))))
    second = compute_gradients(total, [x.uop])[x.uop]
    return Tensor(second).numpy()
