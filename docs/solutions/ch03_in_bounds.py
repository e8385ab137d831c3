"""Exercise 3.2: can a load at this index ever leave its buffer? Decide it with bounds alone."""

from uopc.ir import UOp, vmax, vmin


def provably_in_bounds(index: UOp, size: int) -> bool:
    """True when every value `index` can take lies in [0, size); False when the bounds cannot show it."""
    return vmin(index) >= 0 and vmax(index) < size
