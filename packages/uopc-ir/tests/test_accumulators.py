"""Half precision in the IR: accumulator_dtype, the interpreter's reductions (which accumulate float16 and
bfloat16 sums in float32), and how values reach bfloat16."""

from __future__ import annotations

import pytest

from uopc.ir import DType, Ops, UOp, accumulator_dtype, dtypes, round_to, run, stack, to_python


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16])
def test_half_precision_sums_and_products_accumulate_in_float32(dtype: DType) -> None:
    assert accumulator_dtype(Ops.ADD, dtype) is dtypes.float32
    assert accumulator_dtype(Ops.MUL, dtype) is dtypes.float32
    assert accumulator_dtype(Ops.MAX, dtype) is dtype and accumulator_dtype(Ops.MIN, dtype) is dtype


def test_other_types_accumulate_in_their_own() -> None:
    for dtype in (dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int32, dtypes.uint64):
        assert all(accumulator_dtype(op, dtype) is dtype for op in Ops.REDUCE_OPS)


@pytest.mark.parametrize(("dtype", "stops_at"), [(dtypes.float16, 2048), (dtypes.bfloat16, 256)])
def test_the_interpreter_counts_past_where_the_type_alone_would_stop(dtype: DType, stops_at: int) -> None:
    # in float16, 2048 + 1 rounds back to 2048; in bfloat16, 256 + 1 rounds back to 256
    n = 3000
    ones = stack(*[UOp.const(1.0, dtype)] * n)
    got = to_python(run(ones.sum([0])))
    assert got == [3000.0 if dtype is dtypes.float16 else 3008.0]  # 3000 rounded once, to the type
    assert got[0] > stops_at
    assert to_python(run(ones.reduce(Ops.MAX, [0]))) == [1.0]


def test_an_integer_reaches_bfloat16_through_float32() -> None:
    # 2**24 + 2**16 + 1 rounds to float32 as 2**24 + 2**16, a tie in bfloat16 that goes to the even 2**24;
    # rounded once it would be 2**24 + 2**17. PyTorch and the C backend both go through float32
    assert round_to(dtypes.bfloat16, 2**24 + 2**16 + 1) == 2.0**24
    assert round_to(dtypes.bfloat16, float(2**24 + 2**16 + 1)) == 2.0**24
    assert round_to(dtypes.float16, 2049) == 2048.0 and round_to(dtypes.float32, 2**24 + 1) == 2.0**24
