"""Exercise 10.1: the lower triangle of a matrix, from arange, a comparison and where."""

from uopc.tensor import Tensor, TensorError


def tril(t: Tensor, k: int = 0) -> Tensor:
    """Elements (i, j) with j <= i + k kept, the rest zero, on the last two axes (as numpy.tril).

    A column index that broadcasts against a row index gives the mask without a single loop in Python;
    the comparison and the select fuse into one elementwise kernel with the multiply that follows.
    """
    if t.ndim < 2:
        raise TensorError(f"tril needs at least 2 dimensions, got shape {t.shape}")
    rows, cols = t.shape[-2], t.shape[-1]
    i = Tensor.arange(rows).reshape(rows, 1)
    j = Tensor.arange(cols).reshape(1, cols)
    keep = j <= i + k
    return keep.where(t, 0.0 if t.dtype.is_float else 0)
