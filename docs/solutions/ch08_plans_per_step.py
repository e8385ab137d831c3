"""Exercise 8.2: count the plans each call of a step makes; a Python constant against a one-element tensor."""

from collections.abc import Callable

import numpy as np

from uopc.tensor import Tensor, realizer


def plans_per_step(step: Callable[[int], None], n: int) -> list[int]:
    """How many new plans each of `step(0)`, ..., `step(n - 1)` made."""
    made = []
    for i in range(n):
        before = realizer.plans.made
        step(i)
        made.append(realizer.plans.made - before)
    return made


def _data(i: int) -> Tensor:
    return Tensor(np.random.default_rng(i).standard_normal((3, 4)).astype(np.float32))


def step_with_constant(i: int) -> None:
    """The factor is a Python float: a CONST in the graph, so every new value is a new structure."""
    (_data(i) * (1.0 / (i + 1))).sum().numpy()


def step_with_tensor(i: int) -> None:
    """The factor is a one-element tensor: a BUFFER, renamed away by normalize, so one plan serves all."""
    factor = Tensor([1.0 / (i + 1)]).reshape(())
    (_data(i) * factor).sum().numpy()
