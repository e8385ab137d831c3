"""Exercise 1.2: numpy's broadcasting, made of the two movement ops that uopc does have."""

from collections.abc import Sequence

from uopc.ir import UOp


def broadcast_to(u: UOp, shape: Sequence[int]) -> UOp:
    """`u` broadcast to `shape` by numpy's rules: align the shapes on the right, then grow axes of size 1.

    RESHAPE adds the missing leading axes as size 1; EXPAND grows the size-1 axes. Anything else is an error.
    """
    shape = tuple(shape)
    if len(u.shape) > len(shape):
        raise ValueError(f"cannot broadcast {u.shape} to the lower rank of {shape}")
    padded = (1,) * (len(shape) - len(u.shape)) + u.shape
    if any(s not in (1, n) for s, n in zip(padded, shape, strict=True)):
        raise ValueError(f"cannot broadcast {u.shape} to {shape}")
    return u.reshape(padded).expand(shape)
