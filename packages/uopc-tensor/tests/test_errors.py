"""Bad input is refused at the call that made it, with a TensorError that names the shapes or dtypes.

Every call below is lazy: nothing is realized, so an error raised inside `pytest.raises` comes from building
the graph, the line the user wrote, and not from a kernel that runs later.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest

from uopc.tensor import Tensor, TensorError, dtypes


def x235() -> Tensor:
    return Tensor(np.zeros((2, 3, 5), np.float32))


def raises(fn: Callable[[], Any], *fragments: str) -> None:
    """fn() raises TensorError, and its message mentions every fragment."""
    with pytest.raises(TensorError) as info:
        fn()
    for fragment in fragments:
        assert re.search(re.escape(fragment), str(info.value)), f"{fragment!r} not in {str(info.value)!r}"


def test_shapes_that_do_not_broadcast() -> None:
    a, b = Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros((4,), np.float32))
    raises(lambda: a + b, "add", "(2, 3)", "(4,)")
    raises(lambda: b * a, "mul", "(4,)", "(2, 3)")
    raises(lambda: a < b, "(2, 3)", "(4,)")
    raises(lambda: a.maximum(b), "maximum", "(2, 3)", "(4,)")
    raises(lambda: (a > 0).where(b, 0.0), "where", "(2, 3)", "(4,)")
    raises(lambda: x235() - Tensor(np.zeros((3, 1, 1), np.float32)), "(2, 3, 5)", "(3, 1, 1)")


def test_matmul_inner_dimensions() -> None:
    a, b = Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros((4, 5), np.float32))
    raises(lambda: a @ b, "matmul", "(2, 3)", "(4, 5)")
    raises(lambda: Tensor(np.zeros(3, np.float32)).dot(Tensor(np.zeros(4, np.float32))), "matmul", "(3,)", "(4,)")
    raises(lambda: x235() @ Tensor(np.zeros((3, 5), np.float32)), "(2, 3, 5)", "(3, 5)")
    raises(lambda: Tensor(2.0) @ a, "matmul", "at least 1 dimension")


def test_cross_entropy_labels() -> None:
    logits = Tensor(np.zeros((4, 3), np.float32))
    # float targets are class probabilities, which take the logits' shape
    raises(lambda: logits.cross_entropy(Tensor(np.zeros(4, np.float32))), "cross_entropy", "(4,)", "(4, 3)")
    raises(lambda: logits.cross_entropy(Tensor(np.zeros((4, 1), np.int32))), "cross_entropy", "(4, 3)", "(4, 1)")
    raises(lambda: Tensor(np.zeros(4, np.float32)).one_hot(3), "one_hot", "float32")


def test_backward_needs_a_float_scalar() -> None:
    x = Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    raises((x * 2).backward, "backward", "(2, 3)")
    raises((x.sum() > 0).backward, "backward", "bool")
    raises(lambda: Tensor(np.ones((2, 3), np.int32), requires_grad=True), "requires_grad", "int32")


def test_reshape_to_a_wrong_size() -> None:
    raises(lambda: x235().reshape(4, 8), "reshape", "(2, 3, 5)", "(4, 8)")
    raises(lambda: x235().reshape(-1, -1), "reshape", "-1")
    raises(lambda: x235().reshape(7, -1), "reshape", "(2, 3, 5)", "(7, -1)")
    raises(lambda: x235().reshape(0, 30), "reshape", "(0, 30)")


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.sum(3),
        lambda t: t.sum(-4),
        lambda t: t.max((0, 3)),
        lambda t: t.mean(5),
        lambda t: t.var(-4),
        lambda t: t.softmax(3),
        lambda t: t.log_softmax(-4),
        lambda t: t.logsumexp(3),
        lambda t: t.argmax(3),
        lambda t: t.argmin(-4),
        lambda t: t.flip(3),
        lambda t: t.transpose(0, 3),
        lambda t: t.squeeze(3),
        lambda t: t.flatten(0, 3),
        lambda t: Tensor.cat(t, t, dim=3),
    ],
)
def test_axis_out_of_range(call: Callable[[Tensor], Any]) -> None:
    raises(lambda: call(x235()), "axis", "3 dimensions")


def test_other_bad_axes() -> None:
    raises(lambda: x235().sum((0, 0)), "sum", "(0, 0)")
    raises(lambda: x235().sum((1, -2)), "sum", "(1, -2)")
    raises(lambda: x235().flip((2, -1)), "flip", "(2, -1)")
    raises(lambda: x235().permute(0, 0, 1), "permute", "(2, 3, 5)")
    raises(lambda: x235().permute(1, 0), "permute", "(2, 3, 5)")
    raises(lambda: x235().unsqueeze(4), "unsqueeze", "4")
    raises(lambda: x235().unsqueeze(-5), "unsqueeze", "-5")


def test_bad_movement_arguments() -> None:
    raises(lambda: x235().expand(4, 3, 5), "expand", "(2, 3, 5)", "(4, 3, 5)")
    raises(lambda: x235().expand(3, 5), "expand", "(2, 3, 5)")
    raises(lambda: x235().shrink([(0, 3), None, None]), "shrink", "(2, 3, 5)")
    raises(lambda: x235().shrink([(2, 1), None, None]), "shrink", "(2, 3, 5)")
    raises(lambda: x235().shrink([None, None]), "shrink", "2 bounds", "3 dimensions")
    raises(lambda: x235().pad([(0, 0), (0, 0)]), "pad", "3 dimensions")
    raises(lambda: x235().pad([(-2, -1), (0, 0), (0, 0)]), "pad", "(2, 3, 5)")
    raises(lambda: Tensor.cat(x235(), Tensor(np.zeros((2, 4, 4), np.float32)), dim=1), "cat", "(2, 4, 4)")
    raises(lambda: Tensor.cat([]), "cat", "at least one tensor")
    raises(lambda: Tensor.stack([x235(), Tensor(np.zeros((2, 3, 4), np.float32))]), "stack", "(2, 3, 5)", "(2, 3, 4)")


def test_bad_indices() -> None:
    raises(lambda: x235()[2], "index 2", "size 2")
    raises(lambda: x235()[:, -4], "index -4", "size 3")
    raises(lambda: x235()[0, 0, 0, 0], "4 indices", "3 dimensions")
    raises(lambda: x235()[..., 0, ...], "...")
    raises(lambda: x235()[[0, 2]], "indices must lie in [-2, 2)", "from 0 to 2")
    raises(lambda: x235()[:, Tensor([0.5])], "float32 tensor")
    raises(lambda: x235()[0.5], "float")


def test_bad_values_and_dtypes() -> None:
    raises(lambda: Tensor(np.zeros(3, np.complex64)), "complex64")
    raises(lambda: Tensor(["a"]), "list", "<U1")
    raises(lambda: x235() | 2, "or", "float32")
    raises(lambda: x235().item(), "item", "(2, 3, 5)")
    assert Tensor.zeros(2, dtype=dtypes.int32).dtype is dtypes.int32


def test_one_hot_refuses_labels_outside_the_classes() -> None:
    """A label of 9 with 5 classes would be an all-zero row, and a silently wrong loss."""
    with pytest.raises(TensorError, match=r"indices must lie in \[0, 5\)"):
        Tensor(np.array([0, 9], dtype=np.int32)).one_hot(5)


def test_flatten_with_start_after_end_fails() -> None:
    with pytest.raises(TensorError, match="start_dim 2 comes after end_dim 1"):
        Tensor.zeros(2, 3, 4).flatten(2, 1)


def test_integer_tensor_to_a_negative_power_fails() -> None:
    with pytest.raises(TensorError, match="negative power -1"):
        Tensor(np.array([1, 2], dtype=np.int32)) ** -1


def test_slice_step_zero_fails_as_a_tensor_error() -> None:
    with pytest.raises(TensorError, match="step cannot be zero"):
        Tensor(np.arange(4, dtype=np.float32))[::0]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Tensor(np.array([1, 2], dtype=np.int32)) < 3_000_000_000, "does not fit the tensor's int32"),
        (lambda: Tensor(np.array([1], dtype=np.int8)) + 300, "does not fit the tensor's int8"),
        (lambda: Tensor([1.0]).maximum(cast(Any, [1, 2])), "cannot combine a tensor with a list"),
        (lambda: Tensor.zeros(2, 3).permute(0, 5), "out of range"),
        (lambda: Tensor([1.0, 2.0, 3.0]).expand(-1, 3), "must be >= 0, or -1 to keep an existing axis"),
        (lambda: Tensor([1.0]).expand(-3), "must be >= 0"),
        (lambda: Tensor.full((2,), math.nan, dtypes.int32), "nan does not fit int32"),
        (lambda: (Tensor(np.array([1, 2], dtype=np.int32)) - 3).one_hot(3), r"indices must lie in \[0, 3\)"),
    ],
)
def test_bad_arguments_fail_at_the_call(make: Callable[[], Any], match: str) -> None:
    """Each of these once gave a silently wrong value, or an error from deep inside."""
    with pytest.raises(TensorError, match=match):
        make()


def test_debug_must_be_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG", "true")
    with pytest.raises(ValueError, match="DEBUG must be a level"):
        (Tensor([1.0]) * 2.0).numpy()
