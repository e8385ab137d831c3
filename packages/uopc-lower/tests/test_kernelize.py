"""kernelize: which nodes get their own buffer, how outputs group into kernels, and plan caching.

These tests look at the structure of plans (how many kernels, how many reductions each computes),
not at values: values are checked end to end by the backend and tensor suites.
"""

from __future__ import annotations

import gc

import pytest

from uopc.ir import AxisType, Ops, UOp, UOpError, dtypes, linear_terms
from uopc.lower import (
    Kernel,
    LowerError,
    Opts,
    PlanCache,
    choose_opts,
    kernel_params,
    linearize,
    make_plan,
    materialized,
    normalize,
    rangeify,
)


def buf(slot: int, *shape: int) -> UOp:
    size = 1
    for s in shape:
        size *= s
    return UOp.buffer(slot, size).reshape(shape)


def reduces_per_kernel(graph: UOp) -> list[int]:
    plan = make_plan(graph, opt=False)
    return [sum(1 for u in k.ast.toposort() if u.op is Ops.REDUCE) for k in plan.kernels]


def test_elementwise_chain_is_one_kernel() -> None:
    x = buf(100, 3, 5)
    graph, _ = normalize([((x * 2.0).exp() + 1.0).sqrt()])
    assert len(make_plan(graph, opt=False).kernels) == 1


def test_reduce_feeding_an_expand_is_materialized_once() -> None:
    """softmax: the max and the sum are each computed once, not once per output element; the exponentials
    (read by the sum's kernel and the output's) are a kernel of their own, in between."""
    x = buf(7, 4, 6)
    e = (x - x.reduce(Ops.MAX, [1]).expand((4, 6))).exp()
    graph, _ = normalize([e / e.sum([1]).expand((4, 6))])
    assert reduces_per_kernel(graph) == [1, 0, 1, 0]


def libm_calls(graph: UOp) -> list[int]:
    plan = make_plan(graph, opt=False)
    return [sum(1 for u in k.ast.toposort() if u.op in (Ops.EXP, Ops.LOG)) for k in plan.kernels]


def test_a_libm_call_two_kernels_need_is_made_once() -> None:
    """A softmax's exp read by its sum, its output and its gradient's kernel (a training step's attention):
    one exp per element in the whole plan, not one in each of the three kernels (notes 147)."""
    x, g = buf(7, 4, 6), buf(8, 4, 6)
    e = (x - x.reduce(Ops.MAX, [1]).expand((4, 6))).exp()
    total = e.sum([1]).expand((4, 6))
    p = e / total
    grad_e = g / total - (g * e).sum([1]).expand((4, 6)) / (total * total)
    graph, _ = normalize([p, grad_e])
    assert sum(libm_calls(graph)) == 1, libm_calls(graph)


def test_a_libm_call_that_elementwise_outputs_of_one_shape_share_stays_inline() -> None:
    """Two elementwise outputs of one shape share a kernel, which computes their common exp once already:
    storing it would only add a round trip through memory."""
    x = buf(3, 4, 6)
    e = (x * 0.5).exp()
    graph, _ = normalize([e + 1.0, e * e])
    assert libm_calls(graph) == [1]


def test_reduce_read_by_two_outputs_is_computed_once() -> None:
    """Adam reads a gradient (a matmul) in m, v and the update; the matmul must not run three times."""
    a, b = buf(1, 8, 1, 5), buf(2, 1, 6, 5)
    g = (a.expand((8, 6, 5)) * b.expand((8, 6, 5))).sum([2])
    outputs = [g * 0.1, g * g * 0.01, g - 1.0]
    graph, _ = normalize(outputs)
    assert reduces_per_kernel(graph) == [1]  # one kernel: the reduction, and the three outputs as its epilogue
    plan = make_plan(graph, opt=False)
    assert sum(1 for u in plan.kernels[0].ast.toposort() if u.op is Ops.STORE) == 3  # not g: no other kernel reads it


def test_elementwise_outputs_of_one_shape_share_a_kernel() -> None:
    x, y = buf(3, 4, 4), buf(4, 4, 4)
    m = x * 0.9 + y * 0.1
    graph, _ = normalize([m, x - m * 0.5, (y * y).sqrt()])
    plan = make_plan(graph, opt=False)
    assert len(plan.kernels) == 1
    assert len(set(plan.outputs)) == 3


def test_expanded_arithmetic_is_materialized() -> None:
    """relu(h) feeding a matmul: computing it inside the matmul would redo it once per output column."""
    h = buf(5, 3, 1, 4)
    r = (h > 0.0).where(h, 0.0)
    w = buf(6, 1, 7, 4)
    graph, _ = normalize([(r.expand((3, 7, 4)) * w.expand((3, 7, 4))).sum([2])])
    chosen = materialized(graph)
    assert any(u.op is Ops.WHERE for u in chosen)


def test_kernels_receive_only_buffers_they_read() -> None:
    """A read that simplification deletes (x * 0 for ints) must not leave a parameter behind."""
    x, y = UOp.buffer(0, 6, dtypes.int32), UOp.buffer(1, 6, dtypes.int32)
    graph, _ = normalize([x * 0 + y])
    plan = make_plan(graph, opt=False)
    (kernel,) = plan.kernels
    assert len(kernel.params) == 2  # the output and y; x is gone
    assert plan.steps[0].buffers[1] == 1  # and its argument is y's plan buffer, not x's


def test_kernel_parameters_with_a_gap_are_a_lowering_error() -> None:
    # slots are argument positions: a kernel reading slot 2 but not slot 1 has no signature to call it by
    with pytest.raises(LowerError, match=r"numbered 0..n-1 with no gap, got slots \[0, 2\]") as raised:
        kernel_params(rangeify([(UOp.buffer(0, 4), UOp.buffer(2, 4) * 2.0)]))
    assert not isinstance(raised.value, UOpError)  # the graph is well formed; lowering it failed


def test_plans_are_cached_by_structure_not_by_buffer() -> None:
    cache = PlanCache()
    for step in range(4):
        x = UOp.buffer(1000 + step, 12).reshape((3, 4))  # a new buffer every step, as in training
        graph, inputs = normalize([(x * 2.0).sum([1])])
        plan, _ = cache.get(graph, opt=True)
        assert inputs[0] is UOp.buffer(1000 + step, 12)
    assert cache.made == 1
    assert len(plan.kernels) == 1


def test_a_plan_made_and_dropped_leaves_no_node_alive() -> None:
    # make_plan's memos (each group's lowered kernel, simplified index expressions) live as long as the
    # call: module-wide caches kept up to 1024 kernels and 16384 expressions of plans long dropped
    graph = normalize([(buf(3, 7, 11) * 3.5).exp().sum([1]) + 0.25])[0]
    gc.collect()
    before = set(UOp._cache.values())
    plan = make_plan(graph, opt=True)
    assert len(plan.kernels) == 1
    del plan
    gc.collect()
    assert [u for u in UOp._cache.values() if u not in before] == []


def test_a_different_constant_is_a_different_plan() -> None:
    cache = PlanCache()
    for c in (2.0, 3.0):
        graph, _ = normalize([buf(9, 5) * c])
        cache.get(graph, opt=True)
    assert cache.made == 2


@pytest.mark.parametrize("collector_on", [True, False])
def test_the_cycle_collector_is_off_while_a_plan_is_made_and_as_before_after(
    collector_on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def choose(kernel: UOp) -> Opts:  # called once per kernel, as the plan is made
        seen.append(gc.isenabled())
        return choose_opts(kernel)

    monkeypatch.setattr("uopc.lower.kernelize.choose_opts", choose)
    huge = UOp.buffer(0, 1).reshape((1, 1)).expand((2**25, 2**24)).shrink(((0, 1), (0, 1))).reshape((1,))
    (gc.enable if collector_on else gc.disable)()
    try:
        make_plan(normalize([buf(0, 3, 4).sum([1])])[0], opt=True)
        assert seen == [False] and gc.isenabled() is collector_on
        with pytest.raises(LowerError, match="kernels take views of at most"):
            make_plan(normalize([huge])[0], opt=True)
        assert gc.isenabled() is collector_on  # also after a plan that failed
    finally:
        gc.enable()


def test_a_computed_subgraph_is_read_from_its_buffer_not_walked() -> None:
    """A value computed before (a loss read with item(), say) must not be computed, or its inputs read, again."""
    x, y = UOp.buffer(500, 6), UOp.buffer(501, 6)
    doubled = (x * 2.0).exp()
    graph, inputs = normalize([doubled.sum([0])], computed={doubled: y})
    assert inputs == [y]  # x is not an input any more: nothing below the computed node was visited
    assert not any(u.op in (Ops.MUL, Ops.EXP) for u in graph.toposort())
    assert graph is normalize([y.sum([0])])[0]  # the same plan as reading y directly


def test_the_optimizer_setting_is_part_of_the_plan_key() -> None:
    """OPT=0 after OPT=1 on the same graph must get the plain plan, not the optimized one from the cache."""
    a, b = buf(1, 16, 1, 16), buf(2, 1, 16, 16)
    graph, _ = normalize([(a.expand((16, 16, 16)) * b.expand((16, 16, 16))).sum([2])])
    optimized, plain = make_plan(graph, opt=True), make_plan(graph, opt=False)
    assert optimized.kernels != plain.kernels  # the opts change this kernel
    cache = PlanCache()
    cache.get(graph, opt=True)
    got, new = cache.get(graph, opt=False)
    assert new
    assert got.kernels == plain.kernels


def test_the_plan_used_least_recently_is_dropped_first() -> None:
    cache = PlanCache(size=2)
    graphs = [normalize([buf(9, 5) * c])[0] for c in (2.0, 3.0, 4.0)]
    cache.get(graphs[0], opt=False)
    cache.get(graphs[1], opt=False)
    assert not cache.get(graphs[0], opt=False)[1]  # a hit: graphs[0] is now the most recently used
    cache.get(graphs[2], opt=False)  # full: drops graphs[1], used least recently, though made after graphs[0]
    assert not cache.get(graphs[0], opt=False)[1]
    assert cache.get(graphs[1], opt=False)[1]
    assert cache.made == 4


def matmul(n: int, transposed: bool, a_transposed: bool = False) -> UOp:
    """A @ B, or A @ B.T (or A.T @ B, a weight's gradient), of n x n buffers, as Tensor.matmul builds it."""
    a, b = buf(0, n, n), buf(1, n, n)
    a = a.permute((1, 0)) if a_transposed else a
    b_kn = b.permute((1, 0)) if transposed else b
    products = a.reshape((n, 1, n)).expand((n, n, n)) * b_kn.permute((1, 0)).reshape((1, n, n)).expand((n, n, n))
    return products.sum([2])


def contiguous_per_thread(copy: Kernel, op: Ops) -> bool:
    """Whether each iteration of the copy's threaded loop, with its opts applied, moves one contiguous run of
    memory in memory order through its `op` (LOAD or STORE): the loops inside, innermost first, step by 1, then
    by the trips of the loops inside them. Vector lanes count as the innermost loop, and an upcast's copies of
    the access as a loop around them, if they follow one another a vector apart."""
    program = linearize(copy)
    accesses = [linear_terms(u.src[1]) for u in program.uops if u.op is op]
    strides, first = accesses[0]
    loops = [u for u in program.uops if u.op is Ops.RANGE and u.arg.kind in (AxisType.LOOP, AxisType.VECTOR)]
    lanes = next((r.src[0].arg for r in loops if r.arg.kind is AxisType.VECTOR), 1)
    if [offset - first for _, offset in accesses] != [i * lanes for i in range(len(accesses))]:
        return False
    run = 1
    for r in reversed(loops):
        if strides.get(r, 0) != run:
            return False
        run *= r.src[0].arg * (len(accesses) if r.arg.kind is AxisType.VECTOR else 1)
    return True


@pytest.mark.parametrize("transposed", [False, True])
def test_the_packing_copy_walks_its_operand_in_memory_order_where_it_can(transposed: bool) -> None:
    """B stored as (k, n) (A @ B): a thread reads whole rows of B, not 32 floats of each of k rows, one page
    apart (threaded over the panels, the copy took twice as long). B stored as (n, k) (A @ B.T) is read a line
    of k from each of a panel's columns in turn (pack.copy_block, test_packing.py); each thread copies whole
    panels, axis 0."""
    plan = make_plan(normalize([matmul(512, transposed)])[0], pack=1)  # a copy large enough for threads
    copy, _ = plan.kernels
    assert copy.opts.thread is not None
    assert copy.opts.thread == 0 if transposed else contiguous_per_thread(copy, Ops.LOAD)


@pytest.mark.parametrize(
    ("n", "threads", "width"),
    [
        (1024, 2, 48),
        (2048, 2, 48),
        (512, 2, 32),
        (256, 2, 32),
        (1024, 16, 32),
        (768, 16, 48),
        (192, 1, 48),
        (128, 1, 32),
    ],
)
def test_panels_are_48_wide_where_the_busiest_thread_gains_from_it(n: int, threads: int, width: int) -> None:
    """The 8 x 48 tile multiplies about 10% faster than the 8 x 32 one (pack.WIDE_TILE_GAIN), unless its
    panels leave the busiest thread more columns. n = 1024 on 2 threads: 11 of 22 panels of 48 (528 columns)
    against 16 of 32 (512). 512: 6 of 11 (288) against 256. 1024 on 16 threads: 2 panels either way, 96
    columns against 64. 768 on 16: one of 16 panels (48) against 2 of 24 (64). 192 on one thread: 192 either
    way. 128: 3 panels of 48 (144) against 128. The copy's panels and the tile's width follow."""
    plan = make_plan(normalize([matmul(n, False)])[0], pack=threads)
    product = plan.kernels[-1]
    assert product.opts.vector is not None
    assert product.opts.upcast[product.opts.vector[0]] * product.opts.vector[1] == width
    assert plan.buffers[plan.steps[0].buffers[1]].size == -(-n // width) * width * n


@pytest.mark.parametrize("threads", [2, 4])
def test_each_thread_reads_its_own_share_of_packed_a_and_all_of_b(threads: int) -> None:
    """A.T @ B at 512 packs A into 64 groups of 8 rows. The matmul's threaded loop runs `threads` shares: the
    load of packed A moves by a 1 / threads of its buffer from one share to the next, so each thread reads its
    own part of A, and the load of B's panels does not move with it: every thread walks all of B."""
    plan = make_plan(normalize([matmul(512, False, a_transposed=True)])[0], pack=threads)
    product = plan.kernels[-1]
    share = next(u for u in product.ast.toposort() if u.op is Ops.RANGE and u.arg.axis == product.opts.thread)
    assert share.src[0].arg == threads
    loads = [u for u in product.ast.toposort() if u.op is Ops.LOAD]
    strides = [linear_terms(u.src[1])[0].get(share, 0) for u in loads]
    packed_a = plan.buffers[plan.steps[1].buffers[1]].size
    assert sorted(strides) == [0, packed_a // threads]


def test_the_copy_of_a_writes_whole_lines_to_one_group_before_the_next() -> None:
    """A.T @ B packs A (stored (k, m)) into groups of 8 rows: a row of A gives each group 8 floats, half a
    cache line. The copy takes its rows in blocks, so its innermost loops write 8 rows of a group, 64 floats
    one after the other, before moving to the next group (row by row it wrote 32 bytes to each group in turn)."""
    plan = make_plan(normalize([matmul(512, False, a_transposed=True)])[0], pack=1)
    _, copy_a, _ = plan.kernels
    program = linearize(copy_a)
    strides, _ = linear_terms(next(u for u in program.uops if u.op is Ops.STORE).src[1])
    loops = [u for u in program.uops if u.op is Ops.RANGE and u.arg.kind in (AxisType.LOOP, AxisType.VECTOR)]
    run = 1
    for r in reversed(loops):  # the innermost loops whose stores continue one another
        if strides.get(r, 0) != run:
            break
        run *= r.src[0].arg
    assert run == 64
