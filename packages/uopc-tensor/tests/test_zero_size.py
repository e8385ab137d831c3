"""Zero-size tensors, as numpy and PyTorch have them: a shape with a 0 in it holds no elements, computes
nothing, and a reduction over an axis of size 0 is the op's identity (a sum 0, a product 1, any False, all
True, a mean NaN); max and min of nothing are refused, as numpy and PyTorch refuse them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uopc.tensor import Tensor, TensorError, dtypes

EMPTY = np.zeros((0, 3), np.float32)
ONES = np.ones((2, 3), np.float32)


def same(got: Tensor, want: Any) -> None:
    want = np.asarray(want)
    a = got.numpy()
    assert a.shape == want.shape and a.dtype == want.dtype, f"{a.dtype}{a.shape}, numpy says {want.dtype}{want.shape}"
    np.testing.assert_array_equal(a, want)


CASES: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Any], Any]]] = {
    "itself": (lambda t: t, lambda a: a),
    "add a broadcast row": (lambda t: t + Tensor(ONES[:1]), lambda a: a + ONES[:1]),
    "exp": (Tensor.exp, np.exp),
    "sum over the empty axis": (lambda t: t.sum(0), lambda a: a.sum(0)),
    "sum over the full axis": (lambda t: t.sum(1), lambda a: a.sum(1)),
    "sum of everything": (lambda t: t.sum(), lambda a: a.sum()),
    "prod": (lambda t: t.prod(0), lambda a: a.prod(0)),
    "any, all": (lambda t: t.any(0).cat(t.all(0)), lambda a: np.concatenate([a.any(0), a.all(0)])),
    "max over the full axis": (lambda t: t.max(1), lambda a: a.max(1)),
    "int sum": (lambda t: t.cast(dtypes.int32).sum(0), lambda a: a.astype(np.int32).sum(0, dtype=np.int64)),
    "matmul, empty inner axis": (lambda t: t.T @ t, lambda a: a.T @ a),
    "matmul, empty batch": (lambda t: t @ Tensor(ONES.T), lambda a: a @ ONES.T),
    "reshape": (lambda t: t.reshape(3, 0, 5), lambda a: a.reshape(3, 0, 5)),
    "cat": (lambda t: t.cat(Tensor(ONES)), lambda a: np.concatenate([a, ONES])),
    "pad": (lambda t: t.pad([(1, 1), (0, 0)], 2.0), lambda a: np.pad(a, [(1, 1), (0, 0)], constant_values=2.0)),
    "softmax": (lambda t: t.softmax(0), lambda a: a),
    "cumsum": (lambda t: t.cumsum(0), lambda a: a.cumsum(0)),
    "sort": (lambda t: t.sort(1)[0], lambda a: np.sort(a, 1)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_ops_on_zero_size_tensors_match_numpy(case: str) -> None:
    ours, theirs = CASES[case]
    with np.errstate(all="ignore"):
        same(ours(Tensor(EMPTY)), theirs(EMPTY))


def test_empty_selections_and_constructors() -> None:
    x = Tensor(ONES)
    same(x[1:1], ONES[1:1])
    same(x[:, 3:], ONES[:, 3:])
    same(x[x > 5], ONES[ONES > 5])
    same(Tensor.zeros(0, 4), np.zeros((0, 4), np.float32))
    same(Tensor.arange(0), np.arange(0, dtype=np.int32))
    same(Tensor([]), np.zeros(0, np.float32))  # an empty list is float32, as in PyTorch
    same(Tensor(np.zeros((0, 2), np.int32)).one_hot(3), np.zeros((0, 2, 3), np.int32))
    same(Tensor(EMPTY, dtype=dtypes.bfloat16), EMPTY)
    same(Tensor(EMPTY).mean(0), np.full(3, np.nan, np.float32))  # 0 / 0: NaN, as numpy (which warns) and PyTorch


def test_max_and_min_of_nothing_are_refused_and_logsumexp_is_minus_inf() -> None:
    calls: list[Callable[[], Tensor]] = [
        lambda: Tensor(EMPTY).max(0),
        lambda: Tensor(EMPTY).min(),
        lambda: Tensor(EMPTY).argmax(0),
    ]
    for call in calls:
        with pytest.raises(TensorError, match=r"an axis of size 0 in \(0, 3\)"):
            call()
    same(Tensor(EMPTY).logsumexp(0), np.full(3, -np.inf, np.float32))  # PyTorch's value


def test_gradients_through_zero_size_tensors() -> None:
    """A weight applied to an empty batch has gradient 0 (a sum of no terms); an empty leaf gets an empty one."""
    w = Tensor(ONES.T, requires_grad=True)
    (Tensor(EMPTY) @ w).sum().backward()
    assert w.grad is not None
    same(w.grad, np.zeros((3, 2), np.float32))
    e = Tensor(EMPTY, requires_grad=True)
    ((e * 2.0).sum() + (w * 1.0).sum()).backward()
    assert e.grad is not None
    same(e.grad, EMPTY)
