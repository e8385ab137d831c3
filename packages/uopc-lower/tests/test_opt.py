"""Opts: upcast, unroll and thread reshape a kernel's loops; their errors name the axis and the fix.

Their values are checked against plain Python in test_interpret.py; here, what they do to the graph.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest

from uopc.ir import AxisType, Ops, UOp, dtypes, range_, simplify, sink, substitute
from uopc.lower import Kernel, LowerError, Opts, apply_opts, choose_opts, linearize, rangeify
from uopc.lower.opt import STREAM_MIN_BYTES, TILE_NODES, copies, reduce_strides

Gemm = Callable[[int, int, int], UOp]


def kernel_of(value: UOp, slot: int) -> UOp:
    return rangeify([(UOp.buffer(slot, value.size, value.scalar_dtype), value)])


def gemm_kernel(gemm: Gemm, m: int, k: int, n: int) -> UOp:
    return kernel_of(gemm(m, k, n), 2)


def count(kernel: UOp, op: Ops) -> int:
    return sum(u.op is op for u in kernel.toposort())


def loops(kernel: UOp) -> dict[int, tuple[AxisType, int]]:
    """Axis -> (kind, trip count) of every loop in the kernel."""
    return {u.arg.axis: (u.arg.kind, u.src[0].arg) for u in kernel.toposort() if u.op is Ops.RANGE}


def stored_indices(kernel: UOp) -> list[int]:
    """Every index the kernel's stores write, over every iteration of the loops each END closes."""
    out = []
    for end in kernel.src:
        ranges = end.src[1:] if end.op is Ops.END else ()
        store = end.src[0] if end.op is Ops.END else end
        for values in itertools.product(*(range(r.src[0].arg) for r in ranges)):
            fixed = {r: UOp.const(v, r.scalar_dtype) for r, v in zip(ranges, values, strict=True)}
            index = simplify(substitute(store.src[1], fixed))
            assert index.op is Ops.CONST
            out.append(index.arg)
    return out


ELEMENTWISE = (UOp.buffer(0, 24).reshape((4, 6)) * 2.0).exp()


# ---------------------------------------------------------------------------------------------------------
# Errors: a factor that does not divide, an axis of the wrong kind, an axis that does not exist
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (Opts(upcast={0: 3}), "cannot upcast axis 0 of size 4 by 3; use a divisor of 4"),
        (Opts(upcast={1: 0}), "cannot upcast axis 1 of size 6 by 0"),
        (Opts(upcast={2: 2}), "axis 2 is a reduce axis; upcast takes output axes"),
        (Opts(unroll={2: 3}), "cannot unroll axis 2 of size 8 by 3; use a divisor of 8"),
        (Opts(unroll={0: 2}), "axis 0 is an output axis; unroll takes reduce axes"),
        (Opts(thread=2), "only an output axis can be threaded, axis 2 is reduce"),
        (Opts(thread=7), r"no loop over axis 7; its axes are \[0, 1, 2\]"),
        (Opts(upcast={5: 2}), "no loop over axis 5"),
    ],
)
def test_bad_opts_raise_lower_error(gemm: Gemm, opts: Opts, message: str) -> None:
    with pytest.raises(LowerError, match=message):
        apply_opts(gemm_kernel(gemm, 4, 8, 6), opts)


def test_threading_an_upcast_away_axis_is_refused(gemm: Gemm) -> None:
    # upcasting axis 0 by its full size leaves no loop over it, so there is nothing left to thread
    with pytest.raises(LowerError, match="no loop over axis 0"):
        apply_opts(gemm_kernel(gemm, 4, 8, 6), Opts(upcast={0: 4}, thread=0))


# ---------------------------------------------------------------------------------------------------------
# upcast: n copies of every statement over the axis, in a loop n times shorter
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("upcast", "stores", "left"), [({1: 3}, 3, {0: 4, 1: 2}), ({0: 2, 1: 6}, 12, {0: 2})])
def test_upcast_multiplies_stores(upcast: dict[int, int], stores: int, left: dict[int, int]) -> None:
    kernel = kernel_of(ELEMENTWISE, 1)
    assert count(kernel, Ops.STORE) == 1
    opted = apply_opts(kernel, Opts(upcast=upcast))
    assert count(opted, Ops.STORE) == stores
    assert {axis: n for axis, (_, n) in loops(opted).items()} == left  # an axis upcast fully has no loop left
    assert sorted(stored_indices(opted)) == list(range(24))  # every output element still stored exactly once


def test_upcast_gemm_shares_one_reduce_loop(gemm: Gemm) -> None:
    opted = apply_opts(gemm_kernel(gemm, 4, 8, 6), Opts(upcast={0: 2, 1: 2}))
    reduces = [u for u in opted.toposort() if u.op is Ops.REDUCE]
    assert len(reduces) == 4 and count(opted, Ops.STORE) == 4
    assert len({r.src[1] for r in reduces}) == 1  # one reduce range, shared by the whole 2x2 tile
    assert loops(opted) == {0: (AxisType.LOOP, 2), 1: (AxisType.LOOP, 3), 2: (AxisType.REDUCE, 8)}


PADDED = UOp.buffer(0, 24).reshape((4, 6)).pad(((1, 1), (0, 2))).reshape((8, 6)).permute((1, 0)).exp()


@pytest.mark.parametrize(("value", "axis"), [(ELEMENTWISE, 1), (PADDED, 0), (PADDED, 1)])
def test_copies_simplified_as_they_are_made_are_the_copies_simplified_after(value: UOp, axis: int) -> None:
    # upcast_tile simplifies each copy of a node as it makes it, sources first: the same nodes as one
    # simplify of each whole copy (here a loop index made each of its constants: index math folds)
    (end,) = [e for e in kernel_of(value, 1).src if e.op is Ops.END]
    r = next(x for x in end.src[1:] if x.arg.axis == axis)
    values = {r: [UOp.const(k, r.scalar_dtype) for k in range(r.src[0].arg)]}
    memo: dict[UOp, UOp] = {}
    made = copies(end.src[0], values, len(values[r]), lambda u: simplify(u, memo))
    plain = copies(end.src[0], values, len(values[r]))
    assert made == [simplify(c) for c in plain]
    assert made != plain  # there was something to simplify


# ---------------------------------------------------------------------------------------------------------
# unroll: one REDUCE whose body combines n values, over a loop n times shorter
# ---------------------------------------------------------------------------------------------------------


def test_unroll_keeps_one_reduce(gemm: Gemm) -> None:
    opted = apply_opts(gemm_kernel(gemm, 4, 8, 6), Opts(unroll={2: 4}))
    (red,) = [u for u in opted.toposort() if u.op is Ops.REDUCE]
    assert loops(opted)[2] == (AxisType.REDUCE, 2)
    assert count(red.src[0], Ops.LOAD) == 8  # 4 products of 2 loads each, combined before accumulating
    assert count(red.src[0], Ops.MUL) >= 4


def test_unroll_by_the_full_size_removes_the_loop(gemm: Gemm) -> None:
    opted = apply_opts(gemm_kernel(gemm, 4, 8, 6), Opts(unroll={2: 8}))
    assert count(opted, Ops.REDUCE) == 0 and 2 not in loops(opted)
    assert count(opted, Ops.LOAD) == 16


def test_unroll_of_a_max_combines_with_max() -> None:
    kernel = kernel_of(UOp.buffer(0, 12, dtypes.int32).reshape((3, 4)).reduce(Ops.MAX, [1]), 1)
    opted = apply_opts(kernel, Opts(unroll={2: 2}))
    (red,) = [u for u in opted.toposort() if u.op is Ops.REDUCE]
    assert red.arg is Ops.MAX and red.src[0].op is Ops.MAX  # max(acc, max(v0, v1)), never a sum


# ---------------------------------------------------------------------------------------------------------
# thread: the axis becomes a THREAD range, outermost in every loop nest it closes
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1])
def test_thread_makes_the_axis_outermost(gemm: Gemm, axis: int) -> None:
    opted = apply_opts(gemm_kernel(gemm, 4, 8, 6), Opts(thread=axis))
    assert loops(opted)[axis][0] is AxisType.THREAD
    (end,) = [u for u in opted.src if u.op is Ops.END]
    assert end.src[1].arg == (axis, AxisType.THREAD)  # the first range an END closes is the outermost loop


def test_apply_opts_combines_all_three(gemm: Gemm) -> None:
    opted = apply_opts(gemm_kernel(gemm, 4, 8, 6), Opts(upcast={0: 2, 1: 3}, unroll={2: 2}, thread=1))
    assert loops(opted) == {0: (AxisType.LOOP, 2), 1: (AxisType.THREAD, 2), 2: (AxisType.REDUCE, 4)}
    assert count(opted, Ops.STORE) == 6 and count(opted, Ops.REDUCE) == 6


def test_no_opts_is_the_identity(gemm: Gemm) -> None:
    kernel = gemm_kernel(gemm, 4, 8, 6)
    assert apply_opts(kernel, Opts()) is kernel


def _matmul(layout: str) -> UOp:
    """C = A @ B with A and B stored so that the reduce axis k is contiguous or not."""
    m, k, n = 8, 16, 4
    a = (
        UOp.buffer(1, m * k).reshape((m, 1, k))
        if layout != "AtB"
        else UOp.buffer(1, k * m).reshape((k, m)).permute((1, 0)).reshape((m, 1, k))
    )
    b = (
        UOp.buffer(2, n * k).reshape((1, n, k))
        if layout == "ABt"
        else UOp.buffer(2, k * n).reshape((k, n)).permute((1, 0)).reshape((1, n, k))
    )
    return rangeify([(UOp.buffer(0, m * n), (a.expand((m, n, k)) * b.expand((m, n, k))).sum([2]))])


@pytest.mark.parametrize(("layout", "strided"), [("ABt", [False, False]), ("AB", [False, True]), ("AtB", [True, True])])
def test_reduce_strides_tell_the_matmul_layouts_apart(layout: str, strided: list[bool]) -> None:
    """x @ W.T walks both operands along k; x @ W strides through W; x.T @ dy strides through both."""
    assert sorted(reduce_strides(_matmul(layout))) == strided
    # the renderer gets the same facts in the linear program: the reduce axis, where some load strides
    kernel = _matmul(layout)
    reduce_axes = {r.arg.axis for r in kernel.toposort() if r.op is Ops.RANGE and r.arg.kind is AxisType.REDUCE}
    assert linearize(Kernel("k", kernel)).strided_axes == (reduce_axes if any(strided) else set())


def test_linearize_applies_the_kernels_opts_and_keeps_its_graph(gemm: Gemm) -> None:
    """A Kernel carries its opts; linearize applies them, so one kernel can be linearized under other opts."""
    ast = gemm_kernel(gemm, 4, 8, 6)
    tiled = Kernel("k", ast, Opts(upcast={0: 2, 1: 2}, thread=0))
    program = linearize(tiled)
    assert tiled.ast is ast and sum(u.op is Ops.REDUCE for u in ast.toposort()) == 1
    assert sum(u.op is Ops.DEFINE_ACC for u in program.uops) == 4  # a 2 x 2 register tile
    assert any(u.op is Ops.RANGE and u.arg.kind is AxisType.THREAD for u in program.uops)
    plain = linearize(Kernel("k", ast))
    assert sum(u.op is Ops.DEFINE_ACC for u in plain.uops) == 1
    assert program.params == plain.params == tiled.params and program.written == frozenset({2})


def _matmul_of_chain(m: int, n: int, k: int, chain: int) -> UOp:
    """sum over k of f(A[i, k] * B[j, k]), f a chain of `chain` multiply-adds: a matmul with a long fused body."""
    a = UOp.buffer(1, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(2, n * k).reshape((1, n, k)).expand((m, n, k))
    x = a * b
    for i in range(chain):
        x = x * 0.5 + float(i)
    return rangeify([(UOp.buffer(0, m * n), x.sum([2]))])


@pytest.mark.parametrize("chain", [0, 10, 40, 200])
def test_the_register_tile_shrinks_as_the_body_it_copies_grows(chain: int) -> None:
    """A tile copies the kernel's body once per value, and gcc's time grows with the copies: a plain matmul
    keeps its 8x8 tile, a long fused body gets as big a tile as TILE_NODES allows, and at least none."""
    kernel = _matmul_of_chain(16, 16, 32, chain)
    body = sum(1 for u in kernel.toposort() if u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_GLOBAL))
    tile = math.prod(choose_opts(kernel).upcast.values())
    assert tile * body <= max(TILE_NODES, body)
    if chain == 0:
        assert tile == 64
    if body * 2 <= TILE_NODES:
        assert tile * body * 2 > TILE_NODES  # no smaller than it needs to be: doubling it would pass the limit


# ---------------------------------------------------------------------------------------------------------
# vector: an output axis split into vectors of lanes, the lanes a range of kind VECTOR
# ---------------------------------------------------------------------------------------------------------


def _float_matmul(m: int, k: int, n: int, b_transposed: bool = False) -> UOp:
    """C = A @ B (or A @ B.T) in float32: B's rows hold C's columns, so along C's axis 1 B moves by 1 (or by k)."""
    a = UOp.buffer(0, m * k).reshape((m, 1, k)).expand((m, n, k))
    b = UOp.buffer(1, k * n).reshape((n, k) if b_transposed else (k, n))
    b = b if b_transposed else b.permute((1, 0))
    return kernel_of((a * b.reshape((1, n, k)).expand((m, n, k))).sum([2]).reshape((m, n)), 2)


@pytest.mark.parametrize(("lanes", "left"), [(4, {0: 3, 1: 2}), (8, {0: 3})])
def test_vector_splits_the_axis_into_lanes(lanes: int, left: dict[int, int]) -> None:
    opted = apply_opts(_float_matmul(3, 5, 8), Opts(vector=(1, lanes)))
    kinds = loops(opted)
    assert kinds[3] == (AxisType.VECTOR, lanes)  # the lanes are a new axis after the kernel's others
    assert {a: n for a, (kind, n) in kinds.items() if kind is AxisType.LOOP} == left
    assert sorted(stored_indices(opted)) == list(range(24))  # each output element stored once, by one lane


def test_vector_then_upcast_tiles_vectors() -> None:
    opted = apply_opts(_float_matmul(4, 5, 32), Opts(vector=(1, 8), upcast={0: 2, 1: 2}))
    assert count(opted, Ops.STORE) == 4 and sorted(stored_indices(opted)) == list(range(128))


def test_a_memo_shared_by_the_kernels_of_a_plan_changes_no_kernel(gemm: Gemm) -> None:
    # kernels over the same loops share index expressions, which the memo keeps simplified between them;
    # every kind of opt that simplifies, and the same kernel twice (all of it in the memo the second time)
    work = [
        (_float_matmul(4, 5, 32), Opts(vector=(1, 8), upcast={0: 2, 1: 2})),
        (gemm_kernel(gemm, 4, 8, 6), Opts(upcast={0: 2, 1: 3}, unroll={2: 2}, thread=1)),
        (gemm_kernel(gemm, 4, 8, 6), Opts(upcast={1: 6}, unroll={2: 4})),
        (kernel_of(ELEMENTWISE, 1), Opts(upcast={0: 2, 1: 6})),
        (gemm_kernel(gemm, 4, 8, 6), Opts(upcast={0: 2, 1: 3}, unroll={2: 2}, thread=1)),
    ]
    alone = [apply_opts(kernel, opts) for kernel, opts in work]
    memo: dict[UOp, UOp] = {}
    assert [apply_opts(kernel, opts, memo) for kernel, opts in work] == alone
    assert memo  # the memo was used, not ignored


COLUMNS = UOp.buffer(0, 32).reshape((4, 8))


def test_comparisons_and_selections_of_float_lanes_are_vectors() -> None:
    """A fused ReLU backward, (x <= 0).where(0, y): masks compared from float lanes select float lanes."""
    x, y = UOp.buffer(0, 32).reshape((4, 8)), UOp.buffer(1, 32).reshape((4, 8))
    opted = apply_opts(kernel_of(((x < 0.0) | x.eq(0.0)).where(0.0, y), 2), Opts(vector=(1, 8)))
    assert loops(opted)[2] == (AxisType.VECTOR, 8) and sorted(stored_indices(opted)) == list(range(32))


@pytest.mark.parametrize(
    ("kernel", "opts", "message"),
    [
        (lambda: _float_matmul(4, 5, 8, b_transposed=True), Opts(vector=(1, 8)), "LOAD of data1 does not move one"),
        (lambda: _float_matmul(4, 5, 8), Opts(vector=(1, 3)), "cannot vectorize axis 1 of size 8 by 3"),
        (lambda: _float_matmul(4, 5, 8), Opts(vector=(2, 5)), "only an output axis can be vectorized, axis 2 is"),
        (lambda: kernel_of(COLUMNS.reduce(Ops.MAX, [0]), 1), Opts(vector=(1, 8)), "MAX of"),
        (lambda: kernel_of(COLUMNS.cast(dtypes.int32).sum([0]), 1), Opts(vector=(1, 8)), "CAST of dtypes.int32"),
        (lambda: kernel_of(COLUMNS < 0.0, 1), Opts(vector=(1, 8)), "a store of dtypes.bool along it"),
    ],
)
def test_vectors_are_refused_where_the_renderer_could_not_run_lanes(
    kernel: Callable[[], UOp], opts: Opts, message: str
) -> None:
    with pytest.raises(LowerError, match=message):
        apply_opts(kernel(), opts)


def gated_copy(gate: Callable[[UOp], UOp]) -> UOp:
    """out[j] = x[j] for j < 32, the load and the store under gate(j), as a packed matmul's padded panel."""
    x, out, j = UOp.define_global(0, 32), UOp.define_global(1, 32), range_(32, 0)
    return sink(out.store(j, x.load(j, gate(j)), gate(j)).end(j))


def test_a_gate_the_same_for_all_lanes_keeps_vectors_and_one_lane_by_lane_does_not() -> None:
    opted = apply_opts(gated_copy(lambda j: (j // 8) * 8 < 24), Opts(vector=(0, 8)))
    assert loops(opted)[1] == (AxisType.VECTOR, 8)
    (store,) = (u for u in opted.toposort() if u.op is Ops.STORE)
    assert loops(store.src[3]) == {0: (AxisType.LOOP, 4)}  # simplify made the gate a test of the vector
    with pytest.raises(LowerError, match="gated lane by lane True"):
        apply_opts(gated_copy(lambda j: j < 20), Opts(vector=(0, 8)))


# ---------------------------------------------------------------------------------------------------------
# Streaming stores: which outputs lowering lets a renderer write around the cache
# ---------------------------------------------------------------------------------------------------------

STREAM_FLOATS = STREAM_MIN_BYTES // 4  # the fewest float32 elements an output streams at


def streamed(value: UOp, opts: Opts) -> frozenset[int]:
    """The slots the program of the kernel writing `value` (into the slot after its inputs') may stream."""
    slot = 1 + max(u.arg.slot for u in value.toposort() if u.op is Ops.BUFFER)
    return linearize(Kernel("k", kernel_of(value, slot), opts)).streamed


def test_a_threaded_output_of_the_threshold_size_streams_and_one_element_less_does_not() -> None:
    for n, want in ((STREAM_FLOATS, {2}), (STREAM_FLOATS - 1, set())):
        x, y = UOp.buffer(0, n), UOp.buffer(1, n)
        assert streamed(x + y, Opts(thread=0)) == want
    # the threshold counts bytes: float64 reaches it with half the elements
    x64 = UOp.buffer(0, STREAM_FLOATS // 2, dtypes.float64)
    assert streamed(x64 * 2.0, Opts(thread=0)) == {1}


def test_an_output_streams_only_where_each_thread_writes_one_contiguous_run() -> None:
    n = STREAM_FLOATS
    x = UOp.buffer(0, n)
    assert streamed(x + 1.0, Opts(thread=0)) == {1}
    assert streamed(x + 1.0, Opts()) == set()  # no threaded loop
    assert streamed(x * x, Opts(thread=0, vector=(0, 16))) == set()  # stores whole vectors at lane 0's index
    transposed = UOp.buffer(0, n).reshape((1024, n // 1024)).permute((1, 0))
    assert streamed(transposed + 1.0, Opts(thread=0)) == set()  # threads run down the columns
    rows = UOp.buffer(0, 2 * n).reshape((n, 2)).sum([1])
    assert streamed(rows, Opts(thread=0)) == {1}  # a reduce's output, one value per threaded iteration


def test_a_gated_store_does_not_stream() -> None:
    """A streamed block goes out whole: what a false gate did not write would go out too."""
    n = STREAM_FLOATS
    x, out, j = UOp.define_global(0, n), UOp.define_global(1, n), range_(n, 0, AxisType.THREAD)
    ungated, gated = (sink(out.store(j, x.load(j), g).end(j)) for g in (None, j < n - 8))
    assert [linearize(Kernel("k", k, Opts())).streamed for k in (ungated, gated)] == [{1}, set()]


def test_an_output_the_kernel_also_reads_does_not_stream() -> None:
    """A block of a streamed output is written after the whole block is computed: a load of the same buffer
    in that block would read what is not written yet."""
    n = STREAM_FLOATS
    updated = rangeify([(UOp.buffer(0, n), UOp.buffer(0, n) * 0.5 + UOp.buffer(1, n))])
    assert linearize(Kernel("k", updated, Opts(thread=0))).streamed == set()
