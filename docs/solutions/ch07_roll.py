"""Exercise 7.1: np.roll for a 1-D shaped graph, from SHRINK, PAD and an addition: no new op needed."""

from uopc.ir import UOp


def roll(x: UOp, shift: int) -> UOp:
    """Element i of the result is x[(i - shift) % n], as numpy's np.roll(x, shift)."""
    (n,) = x.shape
    k = shift % n
    if k == 0:
        return x
    tail = x.shrink(((n - k, n),)).pad(((0, n - k),))  # the last k elements move to the front...
    head = x.shrink(((0, n - k),)).pad(((k, 0),))  # ...and the first n - k move back by k
    return tail + head  # where one is real, the other is padding: 0
