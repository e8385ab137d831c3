"""Exercise B.1: compare two results as IEEE values, the way the differential suite compares exact ops."""

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


def ieee_differences(ours: Array, theirs: Array) -> Array:
    """A boolean mask of the elements that differ: a NaN equals a NaN, and +0.0 differs from -0.0.

    `==` gets both wrong: `nan == nan` is False, and `-0.0 == 0.0` is True. Comparing the bytes would get
    both right for float32 alone, but a NaN has many bit patterns and a float16 is not a float32, so compare
    the values: equal, or both NaN; and where both are zero, the same sign bit."""
    if ours.shape != theirs.shape:
        raise ValueError(f"shapes {ours.shape} and {theirs.shape} differ")
    a, b = ours.astype(np.float64), theirs.astype(np.float64)  # every float16/32 value is exact in float64
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    same &= ~((a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b)))
    return np.asarray(~same)
