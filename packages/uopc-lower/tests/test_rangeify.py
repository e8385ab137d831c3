"""rangeify: the structure of the kernels it builds, and the inputs it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from uopc.ir import AxisType, Ops, UOp, UopcError, UOpError, dtypes, param, simplify, substitute
from uopc.lower import LowerError, rangeify


def kernel_of(value: UOp) -> UOp:
    """The kernel writing `value` into a destination BUFFER one slot past its inputs."""
    slots = [u.arg.slot for u in value.toposort() if u.op is Ops.BUFFER]
    dest = UOp.buffer(max(slots, default=-1) + 1, value.size, value.scalar_dtype)
    return rangeify([(dest, value)])


def ops_in(kernel: UOp) -> list[Ops]:
    return [u.op for u in kernel.toposort()]


def loads(kernel: UOp) -> list[UOp]:
    return [u for u in kernel.toposort() if u.op is Ops.LOAD]


def ranges(kernel: UOp) -> dict[int, UOp]:
    return {u.arg.axis: u for u in kernel.toposort() if u.op is Ops.RANGE}


def at(expr: UOp, values: dict[UOp, int]) -> int:
    """The value of an index expression with its loop indices fixed: substitute, then fold."""
    folded = simplify(substitute(expr, {r: UOp.const(v, r.scalar_dtype) for r, v in values.items()}))
    assert folded.op is Ops.CONST, folded
    value: int = folded.arg
    return value


# ---------------------------------------------------------------------------------------------------------
# Index expressions: no division where none is needed, and the right element where one is
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x.reshape((6, 4)).permute((1, 0)).reshape((4, 6)).permute((1, 0)).reshape((24,)),
        lambda x: x.reshape((6, 4)).permute((1, 0)).reshape((2, 2, 6)),
        lambda x: x.reshape((2, 3, 4)).permute((2, 0, 1)).permute((1, 2, 0)),
        lambda x: x.reshape((4, 6)).reshape((24,)).reshape((6, 4)).permute((1, 0)),
    ],
    ids=["permute-reshape-back", "merge-permuted-axes", "permute-twice", "reshape-chain"],
)
def test_reshape_of_permute_needs_no_division(view: Callable[[UOp], UOp]) -> None:
    # the read index is a sum of loop indices times strides: the // and % that each reshape introduces
    # must cancel against the multiply-adds of the next one
    kernel = kernel_of(view(UOp.buffer(0, 24)))
    assert Ops.IDIV not in ops_in(kernel) and Ops.MOD not in ops_in(kernel)


def test_reshape_that_splits_a_permuted_axis_needs_division() -> None:
    # the contrast case: the flat output index must be split into the (6, 4) permuted axes again,
    # so a test that only ever saw division-free kernels would not notice rangeify never dividing
    kernel = kernel_of(UOp.buffer(0, 24).reshape((4, 6)).permute((1, 0)).reshape((24,)))
    assert Ops.IDIV in ops_in(kernel) and Ops.MOD in ops_in(kernel)
    (load,) = loads(kernel)
    (r,) = ranges(kernel).values()
    for i in range(24):  # element i of the transposed (6, 4) array is x[(i % 4) * 6 + i // 4]
        assert at(load.src[1], {r: i}) == (i % 4) * 6 + i // 4


def test_permute_reads_transposed_element() -> None:
    kernel = kernel_of(UOp.buffer(0, 6).reshape((2, 3)).permute((1, 0)))
    (load,) = loads(kernel)
    r = ranges(kernel)
    for i in range(3):
        for j in range(2):
            assert at(load.src[1], {r[0]: i, r[1]: j}) == j * 3 + i


def test_pad_becomes_a_gated_load_and_a_where() -> None:
    kernel = kernel_of(UOp.buffer(0, 4).pad(((2, 1),)))
    (load,) = loads(kernel)
    assert len(load.src) == 3 and load.src[2].dtype is dtypes.bool  # the gate: no read outside the source
    assert Ops.WHERE in ops_in(kernel)  # the padding value itself
    (r,) = ranges(kernel).values()
    for i in range(7):
        gate = simplify(substitute(load.src[2], {r: UOp.const(i)}))
        assert gate.arg == (2 <= i < 6)
        if gate.arg:
            assert at(load.src[1], {r: i}) == i - 2


def test_pad_that_is_never_read_leaves_no_load() -> None:
    # a shrink that keeps only the padding: no element of the buffer is needed, so none is read
    kernel = kernel_of(UOp.buffer(0, 4).pad(((0, 3),)).shrink(((5, 7),)))
    assert not loads(kernel)


def test_flip_reads_reversed_index() -> None:
    kernel = kernel_of(UOp.buffer(0, 5).flip([0]))
    (load,) = loads(kernel)
    (r,) = ranges(kernel).values()
    assert [at(load.src[1], {r: i}) for i in range(5)] == [4, 3, 2, 1, 0]


def test_expand_of_size_one_axis_reads_one_element() -> None:
    kernel = kernel_of(UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4)))
    (load,) = loads(kernel)
    r = ranges(kernel)
    assert r[1] not in load.src[1].toposort()  # the expanded axis does not move the read
    assert [at(load.src[1], {r[0]: i}) for i in range(3)] == [0, 1, 2]


def test_loops_are_numbered_output_axes_first_then_reduce_axes() -> None:
    kernel = kernel_of(UOp.buffer(0, 2 * 3 * 5).reshape((2, 3, 5)).sum([0, 2]))
    found = {axis: (r.arg.kind, r.src[0].arg) for axis, r in ranges(kernel).items()}
    # the output shape (1, 3, 1) keeps one loop, axis 1; the reduced axes get new numbers after the outputs
    assert found == {1: (AxisType.LOOP, 3), 3: (AxisType.REDUCE, 2), 4: (AxisType.REDUCE, 5)}
    (red,) = [u for u in kernel.toposort() if u.op is Ops.REDUCE]
    assert set(red.src[1:]) == {ranges(kernel)[3], ranges(kernel)[4]}


def test_size_one_axes_get_no_loop() -> None:
    kernel = kernel_of(UOp.buffer(0, 3).reshape((1, 3, 1)).sum([0]))
    assert [r.src[0].arg for r in ranges(kernel).values()] == [3]


def test_a_node_used_twice_is_computed_once() -> None:
    x = UOp.buffer(0, 4)
    y = x.exp()
    kernel = kernel_of(y * y)
    assert ops_in(kernel).count(Ops.EXP) == 1 and len(loads(kernel)) == 1


def test_several_outputs_share_one_loop_nest() -> None:
    x = UOp.buffer(0, 6).reshape((2, 3))
    kernel = rangeify([(UOp.buffer(1, 6), x * 2.0), (UOp.buffer(2, 6), x + 1.0)])
    assert len(ranges(kernel)) == 2 and ops_in(kernel).count(Ops.STORE) == 2


# ---------------------------------------------------------------------------------------------------------
# Refused inputs: LowerError naming the problem
# ---------------------------------------------------------------------------------------------------------


def test_outputs_of_different_shapes_are_refused() -> None:
    x = UOp.buffer(0, 6)
    with pytest.raises(LowerError, match=r"share a shape.*\(3, 2\).*\(6,\)"):
        rangeify([(UOp.buffer(1, 6), x), (UOp.buffer(2, 6), x.reshape((3, 2)))])


def test_param_cannot_be_lowered_into_a_kernel() -> None:
    value = UOp.buffer(0, 4) + param(0, dtypes.float32)
    with pytest.raises(LowerError, match="PARAM"):
        rangeify([(UOp.buffer(1, 4), value)])


@pytest.mark.parametrize(
    ("dest", "problem"),
    [
        (UOp.buffer(1, 5), "size 5"),  # one element too many
        (UOp.buffer(1, 4, dtypes.int32), "int32"),  # wrong dtype
        (UOp.const(0.0), "CONST"),  # not a buffer at all
    ],
    ids=["size", "dtype", "not-a-buffer"],
)
def test_bad_destination_is_refused(dest: UOp, problem: str) -> None:
    with pytest.raises(LowerError, match=problem):
        rangeify([(dest, UOp.buffer(0, 4) * 2.0)])


def test_lower_error_is_a_stage_of_its_own() -> None:
    # a graph that cannot be lowered is no malformed node: callers tell the two apart, and `except ValueError`
    # (or `except UopcError`) still catches both
    assert not issubclass(LowerError, UOpError)
    assert issubclass(LowerError, UopcError) and issubclass(LowerError, ValueError)
