"""Exercise 9.2: a gradient checker, and the PERMUTE bug it can and cannot see."""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.tensor import Tensor

Array = npt.NDArray[Any]


def gradient_check(f: Callable[[Tensor], Tensor], ref: Callable[[Array], Array], a: Array, eps: float = 1e-3) -> float:
    """The worst relative error of uopc's gradient of sum(f(x) * w) against central differences in float64.

    The weights w are random and different per element, so a gradient sent to the wrong element changes the
    answer (a plain sum would send 1 everywhere and hide it). Errors are relative to max(1, |gradient|).
    """
    weights = np.random.default_rng(0).uniform(0.5, 1.5, np.shape(ref(a)))
    x = Tensor(a, requires_grad=True)
    (f(x) * Tensor(weights.astype(np.float32))).sum().backward()
    assert x.grad is not None
    got = x.grad.numpy()
    want = np.zeros(a.shape, np.float64)
    for i in np.ndindex(*a.shape):
        plus, minus = a.astype(np.float64), a.astype(np.float64)
        plus[i] += eps
        minus[i] -= eps
        want[i] = ((ref(plus) * weights).sum() - (ref(minus) * weights).sum()) / (2 * eps)
    return float((np.abs(got - want) / np.maximum(1.0, np.abs(want))).max())


# A transposition (a swap of two axes) is its own inverse, so a PERMUTE rule that forgets to invert the
# permutation still passes on it; a 3-cycle such as (1, 2, 0) reveals the bug. On a shape whose sizes differ,
# the wrong rule fails even earlier, with a shape error, so the cube (3, 3, 3) is what makes it a wrong number.
CYCLE = (1, 2, 0)
