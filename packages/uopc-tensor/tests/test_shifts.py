"""The shift operators << and >> against numpy's: every integer dtype, shifts past the width and negative ones,
a Python int on either side, bools, and a clear refusal for floats."""

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from uopc.tensor import Tensor, TensorError

INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _same(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@given(data=st.data())
def test_shifts_match_numpy(dtype: type, data: st.DataObject) -> None:
    bits = np.dtype(dtype).itemsize * 8
    a = data.draw(hnp.arrays(dtype, 7))
    # amounts around the width, where the answer changes from shifted to 0 (or -1), and negative ones
    low = -3 if np.dtype(dtype).kind == "i" else 0
    drawn = data.draw(st.lists(st.integers(low, bits + 2), min_size=7, max_size=7))
    b: np.ndarray[Any, Any] = np.array(drawn).astype(dtype)
    _same((Tensor(a) << Tensor(b)).numpy(), a << b)
    _same((Tensor(a) >> Tensor(b)).numpy(), a >> b)


def test_the_edges_of_the_width() -> None:
    a = np.array([1, -1, -128, 127, 5, -5], dtype=np.int8)
    for amount in (0, 6, 7, 8, 9, -1):
        b = np.full(6, amount, dtype=np.int8)
        _same((Tensor(a) << Tensor(b)).numpy(), a << b)
        _same((Tensor(a) >> Tensor(b)).numpy(), a >> b)


def test_python_ints_on_either_side() -> None:
    a = np.array([1, 2, -3, 100], dtype=np.int32)
    _same((Tensor(a) << 3).numpy(), a << 3)
    _same((Tensor(a) >> 1).numpy(), a >> 1)
    k = np.array([0, 1, 5, 31], dtype=np.int32)
    _same((3 << Tensor(k)).numpy(), 3 << k)
    _same((-1000 >> Tensor(k)).numpy(), -1000 >> k)


def test_bools_shift_as_int8() -> None:
    a, b = np.array([True, False, True]), np.array([True, True, False])
    _same((Tensor(a) << Tensor(b)).numpy(), a << b)
    _same((Tensor(a) >> Tensor(b)).numpy(), a >> b)


@pytest.mark.parametrize(("shift", "name"), [(operator.lshift, "lshift"), (operator.rshift, "rshift")])
def test_floats_are_refused_with_the_op_and_dtype(shift: Callable[[Any, Any], Tensor], name: str) -> None:
    x = Tensor(np.ones(3, dtype=np.float32))
    with pytest.raises(TensorError, match=rf"{name}: shifts take integer or bool operands, got float32"):
        shift(x, 1)
    with pytest.raises(TensorError, match=rf"{name}: .* got float32"):
        shift(Tensor(np.ones(3, dtype=np.int32)), x)


def test_other_operands_give_type_error() -> None:
    with pytest.raises(TypeError):
        Tensor(np.ones(2, dtype=np.int32)) << "1"
