"""Chapter 9: the finite-difference oracle. Its error against eps in float64 and float32, and uopc's gradients
against it, with a broken rule for contrast."""

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.ir import Ops
from uopc.tensor import Tensor
from uopc.tensor.autodiff import GRADIENT_RULES

Array = npt.NDArray[Any]

# --8<-- [start:eps]
exact = math.cos(1.0)  # d/dx sin(x) at x = 1
print("   eps      float64 error   float32 error")
for eps in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5):
    errors = []
    for dt in (np.float64, np.float32):
        x, e = dt(1.0), dt(eps)
        errors.append(abs(float((np.sin(x + e) - np.sin(x - e)) / (2 * e)) - exact))
    print(f"  {eps:.0e}     {errors[0]:.1e}         {errors[1]:.1e}")
# --8<-- [end:eps]


# --8<-- [start:check]
def numgrad(f: Callable[[Array], float], a: Array, eps: float = 1e-3) -> Array:
    """Central differences in float64, one element at a time."""
    g = np.zeros(a.shape, np.float64)
    for i in np.ndindex(*a.shape):
        plus, minus = a.astype(np.float64), a.astype(np.float64)
        plus[i] += eps
        minus[i] -= eps
        g[i] = (f(plus) - f(minus)) / (2 * eps)
    return g


def worst_error(op: Callable[[Tensor], Tensor], ref: Callable[[Array], Array], a: Array) -> float:
    """The largest |uopc gradient - oracle| of sum(op(a) * weights), for fixed random weights."""
    weights = np.random.default_rng(1).uniform(0.5, 1.5, np.shape(ref(a)))
    x = Tensor(a, requires_grad=True)
    (op(x) * Tensor(weights.astype(np.float32))).sum().backward()
    assert x.grad is not None
    return float(np.abs(x.grad.numpy() - numgrad(lambda v: float((ref(v) * weights).sum()), a)).max())


a = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4)).astype(np.float32)
cases: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Array], Array]]] = {
    "sqrt": (Tensor.sqrt, np.sqrt),
    "softmax": (lambda t: t.softmax(1), lambda v: np.exp(v) / np.exp(v).sum(1, keepdims=True)),
    "x @ x.T": (lambda t: t @ t.T, lambda v: v @ v.T),
}
for name, (op, ref) in cases.items():
    print(f"{name:8s} worst error {worst_error(op, ref, a):.1e}")

right = GRADIENT_RULES[Ops.SQRT]
GRADIENT_RULES[Ops.SQRT] = lambda u, g: (g / u,)  # forgets the factor 2 of d sqrt(x) = dx / (2 sqrt(x))
print(f"sqrt with a broken rule: worst error {worst_error(Tensor.sqrt, np.sqrt, a):.1e}")
GRADIENT_RULES[Ops.SQRT] = right
# --8<-- [end:check]
