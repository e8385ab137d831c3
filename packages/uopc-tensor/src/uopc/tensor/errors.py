"""The errors of the tensor library, on uopc's `UopcError` (see `uopc.ir.errors` for the whole hierarchy)."""

from __future__ import annotations

from uopc.ir import UopcError


class TensorError(UopcError, ValueError):
    """A tensor operation called with arguments it cannot take: names the op, shapes and dtypes."""


class TensorIndexError(TensorError, IndexError):
    """An index beyond the end of an axis. An IndexError too, since that is what ends a for-loop over a
    sequence, unpacking, and numpy's reading of nested sequences."""
