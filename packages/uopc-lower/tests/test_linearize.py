"""linearize: loop scopes (hoisting, accumulators, matching ENDRANGEs) and the kernels it refuses."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from uopc.ir import AxisType, Ops, UOp, dtypes, range_, sink
from uopc.lower import Kernel, LinearizeError, Opts, apply_opts, expand_reduces, linear_order, linearize, rangeify

Gemm = Callable[[int, int, int], UOp]


def kernel_of(value: UOp, slot: int, opts: Opts | None = None) -> UOp:
    kernel = rangeify([(UOp.buffer(slot, value.size, value.scalar_dtype), value)])
    return kernel if opts is None else apply_opts(kernel, opts)


def position(program: list[UOp], pred: Callable[[UOp], bool]) -> int:
    (pos,) = [n for n, u in enumerate(program) if pred(u)]
    return pos


def range_at(program: list[UOp], axis: int) -> int:
    return position(program, lambda u: u.op is Ops.RANGE and u.arg.axis == axis)


def endrange_at(program: list[UOp], axis: int) -> int:
    return position(program, lambda u: u.op is Ops.ENDRANGE and u.src[0].arg.axis == axis)


def check_well_formed(program: list[UOp]) -> None:
    """Each node once, after its sources; each ENDRANGE closes the innermost open RANGE, and all close."""
    seen: set[UOp] = set()
    open_loops: list[UOp] = []
    for u in program:
        assert u not in seen, f"{u.op.name} emitted twice"
        assert all(s in seen for s in u.src), f"{u.op.name} emitted before one of its sources"
        seen.add(u)
        if u.op is Ops.RANGE:
            open_loops.append(u)
        elif u.op is Ops.ENDRANGE:
            assert open_loops and open_loops.pop() is u.src[0], "ENDRANGE does not close the innermost loop"
    assert not open_loops, "loops left open"
    assert sum(u.op is Ops.RANGE for u in program) == sum(u.op is Ops.ENDRANGE for u in program)


# ---------------------------------------------------------------------------------------------------------
# Hoisting: each node in the innermost loop it depends on, and no deeper
# ---------------------------------------------------------------------------------------------------------


def test_load_depending_on_outer_range_is_hoisted_hand_built() -> None:
    n = 8
    a, c = UOp.define_global(0, n * n), UOp.define_global(1, n * n)
    i, j = range_(n, 0), range_(n, 1)
    row = a.load(i * n)  # depends on i only
    program = linear_order(sink(c.store(i * n + j, row + a.load(i * n + j)).end(i, j)))
    check_well_formed(program)
    assert program.index(i) < program.index(row) < program.index(j)  # inside the i loop, before j opens


def test_load_depending_on_outer_range_is_hoisted_from_rangeify() -> None:
    # out[i, j] = x[i] * y[i, j]: x[i] is read once per row, not once per element
    x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))
    program = linear_order(kernel_of(x * UOp.buffer(1, 12).reshape((3, 4)), 2))
    check_well_formed(program)
    x_load = position(program, lambda u: u.op is Ops.LOAD and u.src[0].arg.slot == 0)
    assert range_at(program, 0) < x_load < range_at(program, 1)


def test_reduction_independent_of_output_loops_runs_once_before_them() -> None:
    # out[i] = x[i] + sum(y): the sum's loop and accumulator sit outside the output loop
    total = UOp.buffer(1, 5).sum([0]).reshape((1,)).expand((4,))
    program = linear_order(kernel_of(UOp.buffer(0, 4) + total, 2))
    check_well_formed(program)
    reduce_axis = next(u.arg.axis for u in program if u.op is Ops.RANGE and u.arg.kind is AxisType.REDUCE)
    assert endrange_at(program, reduce_axis) < range_at(program, 0)
    assert position(program, lambda u: u.op is Ops.DEFINE_ACC) < range_at(program, reduce_axis)


def test_loop_independent_constant_work_is_outside_every_loop() -> None:
    # exp(2) depends on no loop: it must not be recomputed per element (it folds or is hoisted to the root)
    program = linear_order(kernel_of(UOp.buffer(0, 6) * UOp.const(2.0).exp(), 1))
    exps = [n for n, u in enumerate(program) if u.op is Ops.EXP]
    assert all(n < range_at(program, 0) for n in exps)


# ---------------------------------------------------------------------------------------------------------
# Loops and accumulators
# ---------------------------------------------------------------------------------------------------------


OPTS = [Opts(), Opts(upcast={0: 2, 1: 2}), Opts(unroll={2: 2}), Opts(thread=0), Opts(thread=1, upcast={0: 2})]


@pytest.mark.parametrize("opts", OPTS, ids=repr)
def test_each_endrange_matches_a_range(gemm: Gemm, opts: Opts) -> None:
    program = linear_order(kernel_of(gemm(4, 8, 6), 2, opts))
    check_well_formed(program)
    assert sum(u.op is Ops.RANGE for u in program) == 3


def test_upcast_matmul_has_one_shared_reduce_range(gemm: Gemm) -> None:
    program = linear_order(kernel_of(gemm(4, 8, 6), 2, Opts(upcast={0: 2, 1: 2})))
    check_well_formed(program)
    reduces = [u for u in program if u.op is Ops.RANGE and u.arg.kind is AxisType.REDUCE]
    assert len(reduces) == 1
    start, end = program.index(reduces[0]), endrange_at(program, reduces[0].arg.axis)
    accs = [n for n, u in enumerate(program) if u.op is Ops.DEFINE_ACC]
    updates = [n for n, u in enumerate(program) if u.op is Ops.ACCUMULATE]
    assert len(accs) == 4 and all(n < start for n in accs)  # declared before the loop...
    assert len(updates) == 4 and all(start < n < end for n in updates)  # ...all updated inside the one loop


@pytest.mark.parametrize("opts", [Opts(thread=0), Opts(thread=1), Opts(thread=0, upcast={1: 3})])
def test_threaded_accumulator_is_declared_inside_the_thread_loop(gemm: Gemm, opts: Opts) -> None:
    # an accumulator declared outside the parallel loop would be shared by every thread: a data race
    program = linear_order(kernel_of(gemm(4, 8, 6), 2, opts))
    par = position(program, lambda u: u.op is Ops.RANGE and u.arg.kind is AxisType.THREAD)
    assert par == 0 or all(u.op is not Ops.RANGE for u in program[:par])  # the threaded loop is outermost
    end = endrange_at(program, program[par].arg.axis)
    accs = [n for n, u in enumerate(program) if u.op is Ops.DEFINE_ACC]
    assert accs and all(par < n < end for n in accs)


def test_accumulator_is_declared_per_output_element(gemm: Gemm) -> None:
    program = linear_order(kernel_of(gemm(4, 8, 6), 2))
    acc = position(program, lambda u: u.op is Ops.DEFINE_ACC)
    assert range_at(program, 0) < range_at(program, 1) < acc < range_at(program, 2)


def test_upcast_copies_of_a_reduce_that_depend_on_different_loops_share_one_loop() -> None:
    # out[i, j] = sum_k x[i, k] for j = 1, and 0 (padding) for j = 0. Upcasting j copies the reduction: the
    # copy for j = 0 sums a constant and depends on no loop, the copy for j = 1 depends on loop i, and both
    # are updated in one shared reduce loop. That loop (and both accumulators) must sit inside loop i.
    value = UOp.buffer(0, 6).reshape((2, 1, 3)).pad(((0, 0), (1, 0), (0, 0))).sum([2]).reshape((2, 2))
    program = linear_order(kernel_of(value, 1, Opts(upcast={1: 2})))
    check_well_formed(program)
    (red,) = [u for u in program if u.op is Ops.RANGE and u.arg.kind is AxisType.REDUCE]
    accs = [n for n, u in enumerate(program) if u.op is Ops.DEFINE_ACC]
    assert len(accs) == 2 and all(range_at(program, 0) < n < program.index(red) for n in accs)


def test_expand_reduces_numbers_accumulators_and_scopes_them() -> None:
    x = UOp.buffer(0, 12).reshape((3, 4))
    value = x.sum([1]) + x.reduce(Ops.MAX, [1])
    accs = [u for u in expand_reduces(kernel_of(value.reshape((3,)), 1)).toposort() if u.op is Ops.DEFINE_ACC]
    assert sorted(a.arg for a in accs) == [0, 1]
    assert {a.src[0].arg for a in accs} == {0.0, float("-inf")}  # identities of sum and max
    assert all([r.arg.axis for r in a.src[1:]] == [0] for a in accs)  # inside the output loop only


# ---------------------------------------------------------------------------------------------------------
# Kernels linearize refuses
# ---------------------------------------------------------------------------------------------------------


def test_range_without_end_is_refused_naming_the_loop() -> None:
    i, j = range_(4, 0), range_(3, 1)
    out = UOp.define_global(0, 12)
    with pytest.raises(LinearizeError, match=r"RANGE without END: loops \[loop0, loop1\] are never closed"):
        linear_order(sink(out.store(i * 3 + j, UOp.const(1.0))))
    # one loop closed and the other not: only the open one is named
    with pytest.raises(LinearizeError, match=r"loops \[loop1\] are never closed"):
        linear_order(sink(out.store(i * 3, UOp.const(1.0)).end(i), out.store(j, UOp.const(2.0))))


def test_loop_closed_inside_two_different_loops_is_refused() -> None:
    i, j = range_(4, 0), range_(3, 1)
    out = UOp.define_global(0, 12)
    first = out.store(i * 3 + j, UOp.const(1.0)).end(i, j)  # j inside i
    second = out.store(j * 4 + i, UOp.const(2.0)).end(j, i)  # i inside j
    with pytest.raises(LinearizeError, match="is closed inside both"):
        linear_order(sink(first, second))


def test_unschedulable_kernel_is_refused() -> None:
    # Two reductions share the loop r1, and a third, over r2, sits between them: the r1 loop must run
    # before the r2 loop (to finish `first`) and after it (to use `middle`). No order exists.
    a, b, out = UOp.define_global(0, 4), UOp.define_global(1, 4), UOp.define_global(2, 1)
    r1, r2 = range_(4, 1, AxisType.REDUCE), range_(4, 2, AxisType.REDUCE)
    first = UOp(Ops.REDUCE, dtypes.float32, (a.load(r1), r1), Ops.ADD)
    middle = UOp(Ops.REDUCE, dtypes.float32, (b.load(r2) + first, r2), Ops.ADD)
    last = UOp(Ops.REDUCE, dtypes.float32, (a.load(r1) * middle, r1), Ops.ADD)
    with pytest.raises(LinearizeError, match=r"schedule cannot be completed.*open loops: \[\]"):
        linear_order(sink(out.store(UOp.const(0), last)))
    # the same computation with a fresh range for the last reduction is fine: three loops in sequence
    r3 = range_(4, 3, AxisType.REDUCE)
    fine = UOp(Ops.REDUCE, dtypes.float32, (a.load(r3) * middle, r3), Ops.ADD)
    program = linear_order(sink(out.store(UOp.const(0), fine)))
    check_well_formed(program)
    assert range_at(program, 1) < range_at(program, 2) < range_at(program, 3)


def test_half_precision_sums_accumulate_in_float32_and_round_once() -> None:
    x = UOp.buffer(0, 4 * 64, dtypes.float16).reshape((4, 64))
    program = linear_order(kernel_of(x.sum([1]).reshape((4,)), 1))
    (acc,) = [u for u in program if u.op is Ops.DEFINE_ACC]
    (update,) = [u for u in program if u.op is Ops.ACCUMULATE]
    assert acc.dtype is dtypes.float32 and update.src[1].op is Ops.CAST  # each value widened, then added
    (store,) = [u for u in program if u.op is Ops.STORE]
    assert store.src[2].op is Ops.CAST and store.src[2].dtype is dtypes.float16  # rounded once, at the end
    # a maximum picks one of its inputs: it stays in float16
    (acc,) = [u for u in linear_order(kernel_of(x.reduce(Ops.MAX, [1]).reshape((4,)), 1)) if u.op is Ops.DEFINE_ACC]
    assert acc.dtype is dtypes.float16


def test_unrolled_half_precision_sums_chain_in_float32() -> None:
    x = UOp.buffer(0, 4 * 64, dtypes.bfloat16).reshape((4, 64))
    kernel = kernel_of(x.sum([1]).reshape((4,)), 1, Opts(unroll={1: 4}))
    adds = [u for u in kernel.toposort() if u.op is Ops.ADD and u.src[0].op is Ops.CAST]
    assert adds and all(u.dtype is dtypes.float32 for u in adds)
    (acc,) = [u for u in linear_order(kernel) if u.op is Ops.DEFINE_ACC]
    assert acc.dtype is dtypes.float32


def test_a_read_of_an_accumulator_comes_before_the_update_that_assigns_it() -> None:
    """Online softmax's step: m = max(m, x) is assigned (ACCUMULATE with no op) while the rescaling
    exp(m_old - m) still reads the old m. Nothing in the graph orders the read before the assignment; the
    linearizer must, or the rescaling reads the new maximum and is always exp(0) = 1."""
    out, x = UOp.define_global(0, 3), UOp.define_global(1, 12)
    i, j = range_(3, 0), range_(4, 1, AxisType.REDUCE)
    m = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(-math.inf, dtypes.float32), i), 0)
    total = UOp(Ops.DEFINE_ACC, dtypes.float32, (UOp.const(0.0, dtypes.float32), i), 1)
    value = x.load(i * 4 + j)
    new_m = m.maximum(value)
    rescale = (m - new_m).exp()
    # the maximum's update is built first, so graph order alone would put it before the read
    m_end = UOp(Ops.ACCUMULATE, dtypes.float32, (m, new_m, j), None).end(j)
    total_end = UOp(Ops.ACCUMULATE, dtypes.float32, (total, total * rescale + (value - new_m).exp(), j), None).end(j)
    program = linear_order(sink(out.store(i, m_end + total_end.log()).end(i)))
    position = {u: n for n, u in enumerate(program)}
    assert position[m - new_m] < position[m_end.src[0]]


def test_flops_of_a_loop_whose_bound_varies_count_its_largest_trip_count() -> None:
    """out[i] = sum of x[j] * x[j] for j < i + 1: the inner loop's bound is the outer index (a causal
    attention's loop is one), so flops counts it at its largest, 8: an upper bound, and no crash."""
    n = 8
    x, out = UOp.define_global(0, n), UOp.define_global(1, n)
    i = range_(n, 0)
    j = range_(i + 1, 1, AxisType.REDUCE)
    kernel = sink(out.store(i, UOp(Ops.REDUCE, dtypes.float32, (x.load(j) * x.load(j), j), Ops.ADD)).end(i))
    program = linearize(Kernel("triangle", kernel))
    assert program.flops == n * n * 2  # a multiply and an accumulation per inner iteration, 8 x 8 of them
