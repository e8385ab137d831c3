"""Causal self-attention written with Tensor ops: an invariant (the past never sees the future) and numpy.

Changing the input at positions >= t must leave the outputs before t bit-for-bit unchanged: a masked score
is -inf, its softmax weight is exactly 0, and 0 * v adds exactly nothing. And it must change the outputs
from t on, or the test would pass for a model that ignores its input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.tensor import Tensor

Array = npt.NDArray[Any]
T, D = 9, 6  # distinct lengths, so a transposed score matrix cannot pass for the right one


def weights(seed: int) -> list[Array]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((D, D)) / math.sqrt(D)).astype(np.float32) for _ in range(3)]


def attention(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor) -> Tensor:
    """One head: x is (..., T, D); position i attends to positions j <= i."""
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
    n = x.shape[-2]
    causal = Tensor.arange(n).reshape(n, 1) >= Tensor.arange(n).reshape(1, n)
    return causal.where(scores, -math.inf).softmax(-1) @ v


def attention_numpy(x: Array, wq: Array, wk: Array, wv: Array) -> Array:
    q, k, v = (x.astype(np.float64) @ w for w in (wq, wk, wv))
    scores = q @ k.swapaxes(-2, -1) / math.sqrt(x.shape[-1])
    n = x.shape[-2]
    scores = np.where(np.tril(np.ones((n, n), bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return np.asarray((e / e.sum(-1, keepdims=True)) @ v)


@pytest.mark.parametrize("t", [1, 4, T - 1])
def test_attention_is_causal(t: int) -> None:
    rng = np.random.default_rng(t)
    w = [Tensor(a) for a in weights(0)]
    x = rng.standard_normal((2, T, D)).astype(np.float32)
    changed = x.copy()
    changed[:, t:] = rng.standard_normal((2, T - t, D)).astype(np.float32) * 3
    before, after = attention(Tensor(x), *w), attention(Tensor(changed), *w)
    Tensor.realize(before, after)
    a, b = before.numpy(), after.numpy()
    np.testing.assert_allclose(a, attention_numpy(x, *weights(0)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, attention_numpy(changed, *weights(0)), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(a[:, :t], b[:, :t])  # exactly: the past never read the future
    assert (np.abs(a[:, t:] - b[:, t:]).max(-1) > 1e-3).all()  # every later position did change


def test_attention_gradient_is_causal() -> None:
    """The gradient of an early output with respect to later inputs is exactly zero."""
    w = [Tensor(a) for a in weights(1)]
    x = Tensor(np.random.default_rng(5).standard_normal((T, D)).astype(np.float32), requires_grad=True)
    attention(x, *w)[:3].sum().backward()
    assert x.grad is not None
    g = x.grad.numpy()
    assert (g[3:] == 0).all()
    assert (np.abs(g[:3]).sum(-1) > 0).all()
