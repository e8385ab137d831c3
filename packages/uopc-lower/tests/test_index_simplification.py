"""Index expressions rangeify leaves behind: a chain of reshapes that returns to the flat layout must
leave a plain loop index, with no division or remainder, however many axes it splits into."""

from __future__ import annotations

import pytest

from uopc.ir import Ops, UOp
from uopc.lower import LowerError, Opts, apply_opts, rangeify


def divisions(kernel: UOp) -> int:
    return sum(1 for u in kernel.toposort() if u.op in (Ops.IDIV, Ops.MOD))


@pytest.mark.parametrize("shape", [(2, 12), (2, 3, 4), (2, 3, 4, 5), (5, 1, 3, 2, 2)])
def test_split_then_flatten_leaves_no_division(shape: tuple[int, ...]) -> None:
    n = 1
    for s in shape:
        n *= s
    x = UOp.buffer(0, n).reshape(shape).reshape((n,))
    assert divisions(rangeify([(UOp.buffer(1, n), x)])) == 0


def test_a_real_transpose_keeps_its_division() -> None:
    """The oracle the test above needs: when the layout really changes, the division stays."""
    x = UOp.buffer(0, 24).reshape((2, 3, 4)).permute((2, 1, 0)).reshape((24,))
    assert divisions(rangeify([(UOp.buffer(1, 24), x)])) > 0


def test_upcast_tiles_are_capped() -> None:
    a = UOp.buffer(0, 256 * 4).reshape((256, 1, 4)).expand((256, 256, 4))
    kernel = rangeify([(UOp.buffer(1, 256 * 256), (a * a).sum([2]))])
    with pytest.raises(LowerError, match="tile of 256 values"):
        apply_opts(kernel, Opts(upcast={0: 16, 1: 16}))
