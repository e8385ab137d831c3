"""Exercise 5.1: row-major strides and offsets, the arithmetic behind every LOAD and STORE index."""

from collections.abc import Sequence


def strides(shape: Sequence[int]) -> tuple[int, ...]:
    """How many elements apart two neighbours along each axis are, in a row-major (C-order) array."""
    out = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        out[axis] = out[axis + 1] * shape[axis + 1]
    return tuple(out)


def offset(index: Sequence[int], shape: Sequence[int]) -> int:
    """The position of element `index` in the flat buffer of a row-major array of `shape`."""
    if len(index) != len(shape) or not all(0 <= i < s for i, s in zip(index, shape, strict=True)):
        raise IndexError(f"index {tuple(index)} is outside shape {tuple(shape)}")
    return sum(i * st for i, st in zip(index, strides(shape), strict=True))
