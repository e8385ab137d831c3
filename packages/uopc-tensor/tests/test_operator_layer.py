"""Tensor's operators come from uopc.ir's operator layer: an op a dtype does not take is refused by the tensor
operation itself, once, with the operation's name, and never by catching the IR's error and re-raising it."""

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uopc.tensor import Tensor, TensorError


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda f, b, i: f | 2, "or: OR is not defined for float32; it takes bool or int or uint operands"),
        (lambda f, b, i: 2 | f, "or: OR is not defined for float32"),
        (lambda f, b, i: f ^ f, "xor: XOR is not defined for float32"),
        (lambda f, b, i: b - b, "sub: SUB is not defined for bool; it takes int or uint or float operands"),
        (lambda f, b, i: f & f, "and: AND is not defined for float32; it takes bool or int or uint operands"),
        (lambda f, b, i: i ^ 1.5, "xor: XOR is not defined for float32"),
    ],
    ids=["or", "ror", "xor", "bool sub", "float and", "xor of a promoted int"],
)
def test_an_op_the_dtype_does_not_take_is_refused_once(make: Callable[..., Any], message: str) -> None:
    f, b, i = Tensor([1.5, 2.0]), Tensor([True, False]), Tensor(np.array([1, 2], np.int32))
    with pytest.raises(TensorError, match=re.escape(message)) as info:
        make(f, b, i)
    assert info.value.__context__ is None  # raised where the mistake is made, not caught and re-raised


def test_named_comparisons_match_the_operators() -> None:
    t = Tensor(np.array([1.0, np.nan, 3.0], np.float32))
    np.testing.assert_array_equal(t.eq(3.0).numpy(), (t == 3.0).numpy())
    np.testing.assert_array_equal(t.ne(3.0).numpy(), [True, True, False])
    np.testing.assert_array_equal(t.maximum(2.0).numpy(), np.maximum(t.numpy(), np.float32(2.0)))
