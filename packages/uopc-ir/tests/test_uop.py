"""UOp: hash consing, the weak node cache, validation in the constructors, movement ops and graph walks.

Values of shaped programs are checked against nested Python lists transformed by hand (zip for a
transpose, slicing for a shrink, and so on), never against uopc's own index arithmetic.
"""

import gc
import math
import pickle
import weakref
from collections.abc import Callable
from itertools import product

import pytest

from uopc.ir import (
    AddrSpace,
    AxisType,
    BufferArg,
    Ops,
    RangeArg,
    UOp,
    UOpError,
    call,
    dtypes,
    param,
    range_,
    run,
    simplify,
    sink,
    stack,
    substitute,
    to_python,
    toposort,
)

Nested = list["Nested"] | float | int | bool


def matrix(rows: list[list[float]]) -> UOp:
    return stack(*(stack(*r) for r in rows))


def value(u: UOp) -> Nested:
    result: Nested = to_python(run(u))
    return result


# ---- hash consing ---------------------------------------------------------------------------------------


def test_structurally_equal_graphs_are_one_object() -> None:
    i = range_(4, 0)
    a = (i * 3 + 1) // 2
    b = (range_(4, 0) * 3 + 1) // 2
    assert a is b
    assert a is not (i * 3 + 2) // 2
    assert range_(4, 0) is not range_(4, 1)  # the axis is part of the node
    assert range_(4, 0) is not range_(4, 0, AxisType.REDUCE)


def test_cache_key_tells_1_and_1_0_and_true_apart() -> None:
    # 1 == 1.0 == True in Python, with equal hashes: a cache keyed on the raw arg would hand back the int32
    # constant for a bool or float arg, and skip the validation that rejects those args
    one = UOp.const(1)
    with pytest.raises(UOpError, match="CONST: value True"):
        UOp(Ops.CONST, dtypes.int32, (), True)
    one_f = UOp.const(1.0)
    with pytest.raises(UOpError, match=r"CONST: value 1 \(int\) does not fit float32"):
        UOp(Ops.CONST, dtypes.float32, (), 1)
    assert type(one.arg) is int and type(one_f.arg) is float and type(UOp.const(True).arg) is bool
    p1 = param(1)
    with pytest.raises(UOpError, match="PARAM"):
        UOp(Ops.PARAM, dtypes.int32, (), True)
    assert p1.arg == 1


def test_negative_zero_is_its_own_constant() -> None:
    # 0.0 == -0.0, but 1/x tells them apart: folding one into the other changes results
    pos, neg = UOp.const(0.0), UOp.const(-0.0)
    assert pos is not neg
    assert math.copysign(1.0, neg.arg) == -1.0
    assert to_python(run(UOp.const(1.0) / neg)) == -math.inf


def test_nan_constants_are_one_node() -> None:
    nan = UOp.const(math.nan)
    assert nan is UOp.const(float("nan"))
    assert nan is UOp.const(-math.nan)  # the sign of a nan carries no meaning
    # a nan made by folding (inf - inf has its sign bit set on x86) is the same node too
    assert run(UOp.const(math.inf) - UOp.const(math.inf)) is nan


def test_unreferenced_nodes_are_freed() -> None:
    marker = 918_273_645  # a constant no other test builds

    def build() -> weakref.ref[UOp]:
        node = UOp.const(marker) + 7
        assert any(u is node for u in UOp._cache.values())
        return weakref.ref(node)

    ref = build()
    gc.collect()
    assert ref() is None
    assert not any(u.op is Ops.CONST and u.arg == marker for u in list(UOp._cache.values()))


def test_a_walked_node_is_freed_with_its_last_reference_without_the_collector() -> None:
    """The order toposort keeps on a node holds the nodes below it, not the node itself: a node that held
    itself would be a cycle, alive until the cycle collector ran (and planning pauses the collector)."""
    node = range_(918_273_647, 0) * 5 + 1
    assert toposort(node)[-1] is node
    ref = weakref.ref(node)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        del node
        assert ref() is None
    finally:
        if was_enabled:
            gc.enable()


def test_a_live_parent_keeps_its_sources_cached() -> None:
    parent = UOp.const(918_273_646) * 3
    child_ref = weakref.ref(parent.src[0])
    gc.collect()
    assert child_ref() is UOp.const(918_273_646)
    del parent


def test_pickle_round_trip_returns_the_same_node() -> None:
    g = (range_(5, 0) * 2 + UOp.const(3)) % 4
    assert pickle.loads(pickle.dumps(g)) is g


def test_replace_builds_a_new_node() -> None:
    x = range_(5, 0) + 1
    assert x.replace(op=Ops.SUB) is range_(5, 0) - 1
    assert x.replace(src=(UOp.const(2), UOp.const(1))) is UOp.const(2) + 1
    assert x.replace() is x


# ---- validation -----------------------------------------------------------------------------------------


def test_dtype_mismatch_names_op_dtypes_and_the_fix() -> None:
    with pytest.raises(UOpError) as e:
        UOp(Ops.ADD, dtypes.int32, (UOp.const(1), UOp.const(1.0)))
    msg = str(e.value)
    for part in ("ADD", "dtype mismatch", "int32", "float32", "CAST"):
        assert part in msg


def test_shape_mismatch_names_both_shapes() -> None:
    with pytest.raises(UOpError) as e:
        stack(1, 2) + stack(1, 2, 3)
    msg = str(e.value)
    assert "ADD" in msg and "shape mismatch" in msg and "(2,)" in msg and "(3,)" in msg and "expand" in msg


def _smem(slot: int = 0) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dtypes.f32.ptr(AddrSpace.SHARED), (), BufferArg(slot, 4))


def _global_store() -> UOp:
    return UOp.define_global(0, 4).store(UOp.const(0), UOp.const(1.0))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: UOp(Ops.ADD, dtypes.int32, (UOp.const(1),)), "ADD: takes 2 source"),
        (lambda: UOp(Ops.ADD, dtypes.float32, (UOp.const(1), UOp.const(2))), "result dtype must be int32"),
        (lambda: UOp.const(1.0) & 2.0, "AND: not defined for float32; it takes bool or int or uint"),
        (lambda: UOp.const(1).exp(), "EXP: not defined for int32"),
        (lambda: UOp.const(1).where(1, 2), "WHERE: condition must be bool, got int32"),
        (lambda: UOp.const(1) + 1.5, "float constant 1.5 with a int32 operand"),
        (lambda: UOp(Ops.CONST, dtypes.int8, (), 300), r"does not fit int8; it takes an int in \[-128, 127\]"),
        (lambda: UOp(Ops.CONST, dtypes.float32, (), 0.1), "not exactly a float32"),
        (lambda: UOp(Ops.CONST, dtypes.bool, (), 1), "does not fit bool; it takes True or False"),
        (lambda: UOp(Ops.ADD, dtypes.int32, (UOp.const(1), 2)), "sources must be UOps"),  # type: ignore[arg-type]
        (lambda: UOp("ADD", dtypes.int32), "op must be an Ops member"),  # type: ignore[arg-type]
        (lambda: UOp(Ops.CAST, "f32", (UOp.const(1),)), "dtype must be a DType"),  # type: ignore[arg-type]
        (lambda: UOp(Ops.NEG, dtypes.f32.ptr(), (UOp.const(1.0),)), "not the pointer"),
        (lambda: stack(True, False).sum((0,)), "cannot reduce bool with ADD"),
        (lambda: stack(1, 2).reduce(Ops.SUB, (0,)), "arg must be \\(op, axes\\)"),
        (lambda: stack(1, 2).sum((1,)), r"axes \(1,\) must be distinct axes of \(2,\)"),
        (lambda: stack(1, 2.0), "STACK: elements must share the dtype"),
        (stack, "STACK: needs at least one element"),
        (lambda: UOp.buffer(0, -1), "BUFFER: arg must be BufferArg"),
        (lambda: UOp(Ops.BUFFER, dtypes.f32, (), BufferArg("0", 4)), "BUFFER: arg must be BufferArg"),  # type: ignore[arg-type]
        (lambda: UOp(Ops.DEFINE_GLOBAL, dtypes.f32, (), BufferArg(0, 4)), "dtype must be a pointer"),
        (lambda: range_(UOp.const(4.0), 0), "RANGE: end and index must share an integer dtype"),
        (lambda: UOp(Ops.RANGE, dtypes.int32, (UOp.const(4),), RangeArg(1.5, AxisType.LOOP)), "RANGE: needs"),  # type: ignore[arg-type]
        (lambda: UOp(Ops.PARAM, dtypes.int32, (), -1), "PARAM: takes no sources and an index >= 0"),
        (lambda: call("f", param(1), UOp.const(1)), "f: body uses parameter 1 but the call passes 1 argument"),
        (lambda: call("f", param(0), UOp.const(1.0)), "f: parameter 0 is int32, argument is float32"),
        (lambda: UOp.const(1).load(UOp.const(0)), "LOAD: needs src = \\(pointer, index\\)"),
        (lambda: UOp.define_global(0, 4).load(UOp.const(0.0)), "LOAD: index must be an integer"),
        (lambda: UOp.define_global(0, 4).store(UOp.const(0), UOp.const(1)), "stores int32 into a float32 buffer"),
        (lambda: sink(UOp.const(1)).replace(dtype=dtypes.int32), "SINK: dtype must be void"),
        (lambda: UOp(Ops.BARRIER, dtypes.f32.ptr(), (UOp.define_global(0, 4),)), "BARRIER: needs .* shared memory"),
        (lambda: UOp(Ops.BARRIER, dtypes.f32.ptr(AddrSpace.SHARED), (_smem(), _global_store())), "stores into shared"),
        (lambda: UOp(Ops.BARRIER, dtypes.i32.ptr(AddrSpace.SHARED), (_smem(),)), "takes the dtype of its buffer"),
        (lambda: UOp(Ops.SHUFFLE, dtypes.f32, (UOp.const(1.0), UOp.const(1.0))), "SHUFFLE: needs .* int32 lane"),
        (lambda: UOp(Ops.SHUFFLE, dtypes.f32, (UOp.const(1), UOp.const(1))), "SHUFFLE: needs src = \\(value of"),
        (lambda: UOp(Ops.MMA, dtypes.f32, (UOp.const(1.0, dtypes.f16),) * 11, 0), "MMA: needs 12 sources"),
        (lambda: UOp(Ops.MMA, dtypes.f32, (UOp.const(1.0),) * 12, 0), "MMA: needs 12 sources of one 16-bit float"),
        (lambda: UOp(Ops.MMA, dtypes.f16, (UOp.const(1.0, dtypes.f16),) * 12, 0), "MMA: is float32 with arg 0..3"),
        (lambda: UOp(Ops.MMA, dtypes.f32, (UOp.const(1.0, dtypes.f16),) * 12, 4), "MMA: is float32 with arg 0..3"),
    ],
)
def test_malformed_nodes_raise_where_they_are_built(build: Callable[[], object], message: str) -> None:
    with pytest.raises(UOpError, match=message):
        build()


def test_call_parameters_are_checked_only_in_their_own_body() -> None:
    # the inner body uses parameter 1; the outer call passes one argument, which is fine: it is not its PARAM
    inner = call("g", param(1) + param(0), UOp.const(1), UOp.const(2))
    outer = call("f", inner + param(0), UOp.const(5))
    assert to_python(run(outer)) == 3 + 5


def test_scalars_broadcast_in_alu_ops() -> None:
    s = stack(1, 2, 3)
    assert (s + 1).shape == (3,)
    assert (2 * s).shape == (3,)
    assert value(s * 10 + 1) == [11, 21, 31]
    assert value((s < 2).where(s, 0)) == [1, 0, 0]


# ---- movement -------------------------------------------------------------------------------------------

M23 = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_reshape() -> None:
    m = matrix(M23)
    assert m.shape == (2, 3)
    r = m.reshape((3, 2))
    assert r.shape == (3, 2)
    assert value(r) == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert value(m.reshape((6,))) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert m.reshape((2, 3)) is m
    assert value(UOp.const(7).reshape((1, 1))) == [[7]]
    with pytest.raises(UOpError, match=r"RESHAPE: cannot reshape \(2, 3\) \(6 elements\) to \(4,\) \(4 elements\)"):
        m.reshape((4,))
    with pytest.raises(UOpError, match="negative dimension"):
        m.reshape((6, 1, -1))
    assert UOp.buffer(0, 0, dtypes.float32).reshape((0, 3)).shape == (0, 3)  # zero-size, as numpy's


def test_permute() -> None:
    m = matrix(M23)
    t = m.permute((1, 0))
    assert t.shape == (3, 2)
    assert value(t) == [list(col) for col in zip(*M23, strict=True)]
    assert m.permute((0, 1)) is m
    cube = stack(*(matrix([[float(100 * a + 10 * b + c) for c in range(4)] for b in range(3)]) for a in range(2)))
    p = cube.permute((2, 0, 1))
    assert p.shape == (4, 2, 3)
    got = value(p)
    assert isinstance(got, list)
    for c, a, b in product(range(4), range(2), range(3)):
        assert got[c][a][b] == 100 * a + 10 * b + c  # type: ignore[index]
    with pytest.raises(UOpError, match=r"PERMUTE: \(0, 0\) is not a permutation of the 2 axes"):
        m.permute((0, 0))
    with pytest.raises(UOpError, match="not a permutation"):
        m.permute((0, 1, 2))


def test_expand() -> None:
    row = stack(1, 2, 3).reshape((1, 3))
    e = row.expand((2, 3))
    assert e.shape == (2, 3)
    assert value(e) == [[1, 2, 3], [1, 2, 3]]
    assert row.expand((1, 3)) is row
    with pytest.raises(UOpError, match=r"EXPAND: cannot expand \(1, 3\) to \(2, 6\): only axes of size 1 grow"):
        row.expand((2, 6))
    with pytest.raises(UOpError, match="the rank stays 2"):
        row.expand((2, 1, 3))
    with pytest.raises(UOpError, match="EXPAND"):
        row.expand((-2, 3))
    assert row.expand((0, 3)).shape == (0, 3)  # as numpy's broadcast_to: a size-1 axis may become empty


def test_shrink() -> None:
    m = matrix(M23)
    s = m.shrink(((1, 2), (0, 2)))
    assert s.shape == (1, 2)
    assert value(s) == [row[0:2] for row in M23[1:2]]
    assert m.shrink(((0, 2), (0, 3))) is m
    for bad in (((0, 3), (0, 3)), ((2, 1), (0, 3)), ((0, 2),)):
        with pytest.raises(UOpError, match=r"SHRINK: bounds .* do not fit"):
            m.shrink(bad)
    assert m.shrink(((1, 1), (0, 3))).shape == (0, 3)  # an empty slice, as numpy's m[1:1]


def test_pad_fills_with_zero() -> None:
    m = matrix(M23)
    p = m.pad(((1, 0), (0, 2)))
    assert p.shape == (3, 5)
    assert value(p) == [[0.0] * 5] + [[*row, 0.0, 0.0] for row in M23]
    assert m.pad(((0, 0), (0, 0))) is m
    assert value(stack(True).pad(((1, 1),))) == [False, True, False]
    with pytest.raises(UOpError, match=r"PAD: widths .* none negative"):
        m.pad(((0, -1), (0, 0)))


def test_flip() -> None:
    m = matrix(M23)
    assert m.flip((1,)).shape == (2, 3)
    assert value(m.flip((1,))) == [row[::-1] for row in M23]
    assert value(m.flip((0, 1))) == [row[::-1] for row in M23[::-1]]
    assert m.flip(()) is m
    with pytest.raises(UOpError, match=r"FLIP: axes .* must be distinct axes"):
        m.flip((2,))
    with pytest.raises(UOpError, match="FLIP"):
        m.flip((0, 0))


def test_movement_keeps_the_dtype_and_checks_its_arg() -> None:
    m = matrix(M23)
    with pytest.raises(UOpError, match="RESHAPE: dtype int32 differs from its source's float32"):
        UOp(Ops.RESHAPE, dtypes.int32, (m,), (6,))
    with pytest.raises(UOpError, match="arg must be a tuple of ints"):
        UOp(Ops.RESHAPE, dtypes.float32, (m,), (6.0,))
    with pytest.raises(UOpError, match=r"arg must be a tuple of \(begin, end\) pairs"):
        UOp(Ops.SHRINK, dtypes.float32, (m,), ((0, 1, 2), (0, 3)))


def test_reduce_keeps_reduced_axes_of_size_one() -> None:
    m = matrix(M23)
    assert m.sum((1,)).shape == (2, 1)
    assert value(m.sum((1,))) == [[sum(r)] for r in M23]
    assert value(m.reduce(Ops.MAX, (0,))) == [[max(c) for c in zip(*M23, strict=True)]]
    assert value(m.sum((0, 1))) == [[sum(map(sum, M23))]]


# ---- graph walks ----------------------------------------------------------------------------------------


def test_toposort_lists_every_node_once_after_its_sources() -> None:
    i, j = range_(4, 0), range_(3, 1)
    shared = i * 3 + j
    root = sink(shared // 2, shared % 2, shared)
    order = toposort(root)
    assert len(order) == len(set(order))
    pos = {u: n for n, u in enumerate(order)}
    assert order[-1] is root
    for u in order:
        assert all(pos[s] < pos[u] for s in u.src)
    # every node reachable from the root is listed: collect them by an independent walk
    seen, todo = set(), [root]
    while todo:
        u = todo.pop()
        if u not in seen:
            seen.add(u)
            todo.extend(u.src)
    assert set(order) == seen


def test_toposort_keeps_the_order_and_hands_out_copies() -> None:
    i = range_(4, 0)
    root = sink(i * 3 + 1, i * 3)
    first = toposort(root)
    first.append(UOp.const(7))  # a caller's list is its own: changing it changes nothing kept
    second = root.toposort()
    assert second == first[:-1] and second is not first
    assert toposort(root, lambda u: u.src) == second  # the kept order is the order a walk finds
    assert toposort(i * 3) == [UOp.const(4, dtypes.index), i, UOp.const(3, dtypes.index), i * 3]


def test_toposort_enter_chooses_the_sources_to_follow() -> None:
    body = param(0) * 2
    c = call("f", body, UOp.const(3) + 4)
    order = toposort(c, lambda u: u.src[1:] if u.op is Ops.CALL else u.src)
    assert body not in order and param(0) not in order
    assert UOp.const(3) + 4 in order


def test_substitute_rebuilds_only_what_depends_on_the_replaced_node() -> None:
    i, j = range_(4, 0), range_(3, 1)
    e = (i * 3 + j) // 2
    out = substitute(e, {i: UOp.const(2)})
    assert out is (UOp.const(2) * 3 + j) // 2
    assert substitute(e, {}) is e
    assert substitute(e, {e: j}) is j


def test_substitute_can_leave_call_bodies_alone() -> None:
    p0 = param(0)
    c = call("f", p0 + 1, p0 * 2)
    assert substitute(c, {p0: UOp.const(5)}) is call("f", UOp.const(5) + 1, UOp.const(5) * 2)
    assert substitute(c, {p0: UOp.const(5)}, enter_calls=False) is call("f", p0 + 1, UOp.const(5) * 2)


def test_python_operators_build_the_documented_ops() -> None:
    x, y = param(0), param(1)
    assert (x > y) is (y < x)
    assert (x - 1).op is Ops.SUB and (1 - x).src[0] is UOp.const(1)
    assert (x // 2).op is Ops.IDIV and (x % 2).op is Ops.MOD
    assert x.eq(y).op is Ops.CMPEQ and x.ne(y).op is Ops.CMPNE
    assert (x & y).op is Ops.AND and (x | y).op is Ops.OR and (x ^ y).op is Ops.XOR
    f = param(0, dtypes.f32)
    assert (f / 2).op is Ops.DIV and (f**2.0).op is Ops.POW and (2.0 / f).src[0] is UOp.const(2.0)
    assert x.cast(dtypes.int32) is x and x.cast(dtypes.f32).op is Ops.CAST


@pytest.mark.parametrize(("a", "b"), list(product(range(-2, 3), range(-2, 3))))
def test_comparison_operators_mean_what_python_means(a: int, b: int) -> None:
    x, y = UOp.const(a), UOp.const(b)
    results = [run(r).arg for r in (x < y, x > y, x <= y, x >= y, x.eq(y), x.ne(y))]
    assert results == [a < b, a > b, a <= b, a >= b, a == b, a != b]


FLOAT_EDGES = [math.nan, -math.inf, -1.5, -0.0, 0.0, 1.5, math.inf]


@pytest.mark.parametrize(("a", "b"), list(product(FLOAT_EDGES, FLOAT_EDGES)))
def test_float_comparisons_follow_ieee_with_nan_and_signed_zeros(a: float, b: float) -> None:
    # every comparison with a NaN is false but !=; "a <= b" written as "not a > b" would be true for NaN
    x, y = UOp.const(a), UOp.const(b)
    results = [run(r).arg for r in (x < y, x > y, x <= y, x >= y, x.eq(y), x.ne(y))]
    assert results == [a < b, a > b, a <= b, a >= b, a == b, a != b]
    assert [run(x <= b).arg, run(x >= b).arg] == [a <= b, a >= b]  # a Python float on the right


def test_scalar_operands_take_the_other_sides_dtype() -> None:
    x = param(0, dtypes.int8)
    assert (x + 1).src[1].dtype is dtypes.int8
    assert (3 * x).src[0].dtype is dtypes.int8
    cond = param(1, dtypes.bool)
    assert cond.where(1.5, param(2, dtypes.f16)).src[1] is UOp.const(1.5, dtypes.f16)
    assert cond.where(param(2, dtypes.u8), 0).src[2] is UOp.const(0, dtypes.u8)


def test_pointer_nodes() -> None:
    g = UOp.define_global(0, 16)
    assert g.dtype == dtypes.float32.ptr(AddrSpace.GLOBAL) and g.scalar_dtype is dtypes.float32
    i = range_(16, 0)
    st = g.store(i, g.load(i) * 2.0).end(i)
    assert st.dtype is dtypes.void and st.op is Ops.END
    gated = g.load(i, i < 8)
    assert gated.src[2].dtype is dtypes.bool
    assert g.store(i, gated, i < 8).src[3].dtype is dtypes.bool
    with pytest.raises(UOpError, match="gate must be bool, got int32"):
        g.store(i, gated, i)
    # a gate known to hold is no gate; one known to fail stays (a statement does not fold to nothing)
    assert simplify(g.store(i, gated, i < 16)) is g.store(i, g.load(i, i < 8))
    assert len(simplify(g.store(i, gated, i < 0)).src) == 4
    assert UOp.buffer(1, 6).shape == (6,)
