"""Index types: rangeify builds index arithmetic in int64 and narrows a kernel to int32 only where bounds
prove every index, loop bound and constant fits, so no index wraps, at run time or while folding constants.

The views here are expansions of a few elements to billions, shrunk back to a handful: the index into the
expanded view passes 2**31 while no large buffer exists. The reference offsets are Python integers.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.ir import Ops, UOp, dtypes, simplify, substitute
from uopc.lower import LowerError, Opts, apply_opts, choose_opts, rangeify
from uopc.lower.rangeify import MAX_VIEW_ELEMENTS


def kernel_of(value: UOp) -> UOp:
    return rangeify([(UOp.buffer(1, value.size, value.scalar_dtype), value)])


def index_dtypes(kernel: UOp) -> set[str]:
    """The dtypes of the loop indices and of the offsets loads and stores use."""
    found = {u.dtype.name for u in kernel.toposort() if u.op is Ops.RANGE}
    return found | {u.src[1].dtype.name for u in kernel.toposort() if u.op in (Ops.LOAD, Ops.STORE)}


def load_offsets(kernel: UOp) -> list[int]:
    """The element of buffer 0 that each output element reads: the load's index with the output loop fixed."""
    (load,) = [u for u in kernel.toposort() if u.op is Ops.LOAD]
    (loop,) = [u for u in kernel.toposort() if u.op is Ops.RANGE]
    out = []
    for i in range(loop.src[0].arg):
        folded = simplify(substitute(load.src[1], {loop: UOp.const(i, loop.scalar_dtype)}))
        assert folded.op is Ops.CONST, folded
        out.append(folded.arg)
    return out


def test_small_kernels_index_in_int32(gemm) -> None:  # type: ignore[no-untyped-def]
    kernel = rangeify([(UOp.buffer(2, 12 * 8, dtypes.int32), gemm(12, 16, 8))])
    assert index_dtypes(kernel) == {"int32"}
    assert index_dtypes(apply_opts(kernel, choose_opts(kernel))) == {"int32"}


def test_an_offset_beyond_int32_makes_the_kernel_int64() -> None:
    # row r of a (7, 2**30) view of x repeated 2**30 times starts at element r * 2**30, up to 6 * 2**30
    view = UOp.buffer(0, 7).reshape((1, 7)).expand((2**30, 7)).reshape((7, 2**30))
    kernel = kernel_of(view.shrink(((0, 7), (0, 1))).reshape((7,)))
    assert index_dtypes(kernel) == {"int64"}
    assert load_offsets(kernel) == [r * 2**30 % 7 for r in range(7)]


def test_opts_keep_the_index_type_of_a_wide_kernel() -> None:
    view = UOp.buffer(0, 7).reshape((1, 7)).expand((2**30, 7)).reshape((7, 2**30)).shrink(((0, 7), (0, 4)))
    kernel = apply_opts(kernel_of(view), Opts(upcast={1: 2}, thread=0))
    assert index_dtypes(kernel) == {"int64"}
    stores = [u for u in kernel.toposort() if u.op is Ops.STORE]  # out[index] = x[load index], once per copy
    rows, halves = sorted((u for u in kernel.toposort() if u.op is Ops.RANGE), key=lambda u: u.arg.axis)
    got = {}
    for r in range(7):
        for h in range(2):
            fixed = {rows: UOp.const(r, dtypes.int64), halves: UOp.const(h, dtypes.int64)}
            for store in stores:
                element = simplify(substitute(store.src[1], fixed)).arg
                got[element] = simplify(substitute(store.src[2].src[1], fixed)).arg
    assert got == {r * 4 + c: (r * 2**30 + c) % 7 for r in range(7) for c in range(4)}


def test_folding_an_offset_constant_never_wraps() -> None:
    # the window starts at element (2**15 - 2) * 98304 + 98301 of the view, past 2**31: folded in int32,
    # that constant wrapped and the kernel read the wrong elements
    a, b = 2**15, 6 * 2**29 // 2**15
    view = UOp.buffer(0, 6).reshape((1, 6)).expand((2**29, 6)).reshape((a, b)).shrink(((a - 2, a), (b - 3, b)))
    kernel = kernel_of(view.reshape((6,)))
    want = [((a - 2 + i // 3) * b + (b - 3 + i % 3)) % 6 for i in range(6)]
    assert load_offsets(kernel) == want


def test_a_loop_longer_than_int32_runs_in_int64() -> None:
    n = 2**31 + 3
    kernel = kernel_of(UOp.buffer(0, 1, dtypes.int64).reshape((1, 1)).expand((1, n)).sum([1]).reshape((1,)))
    (loop,) = [u for u in kernel.toposort() if u.op is Ops.RANGE]
    assert loop.dtype is dtypes.int64 and loop.src[0].arg == n


def test_views_beyond_the_limit_are_refused() -> None:
    huge = UOp.buffer(0, 1).reshape((1, 1)).expand((2**25, 2**24))
    assert huge.size > MAX_VIEW_ELEMENTS
    with pytest.raises(LowerError, match=r"EXPAND float32\(33554432, 16777216\) has 562949953421312 elements"):
        kernel_of(huge.shrink(((0, 1), (0, 1))).reshape((1,)))


@settings(derandomize=True, database=None, deadline=None, max_examples=60)  # seeded: the same views every run
@given(
    n=st.integers(2, 9),
    blocks=st.integers(2**12, 2**16),
    split=st.integers(2, 14),
    at=st.floats(0.0, 1.0),
    flip=st.booleans(),
)
def test_windows_of_huge_expanded_views_read_the_right_elements(
    n: int, blocks: int, split: int, at: float, flip: bool
) -> None:
    # x (n elements) repeated 2**26 to 2**30 times, viewed 2**split wide (a width n need not divide), with
    # a 2 x 3 window cut out near a random place: offsets near and past 2**31 and 2**32
    rows = blocks * 2**14
    width = 2**split
    height = rows * n // width
    r0, c0 = min(int(at * height), height - 2), min(int(at * width), width - 3)
    view = UOp.buffer(0, n).reshape((1, n)).expand((rows, n)).reshape((height, width))
    window = view.shrink(((r0, r0 + 2), (c0, c0 + 3)))
    if flip:
        window = window.flip((0,))
    kernel = kernel_of(window.reshape((6,)))
    want = [((r0 + (1 - i // 3 if flip else i // 3)) * width + c0 + i % 3) % n for i in range(6)]
    assert load_offsets(kernel) == want
    assert len(index_dtypes(kernel)) == 1  # one index type per kernel
