"""Large matmuls through the Tensor API on the C backend: the plan packs their operands (uopc.lower.pack),
for the forward product and the weight's gradient, and the values are numpy's."""

from __future__ import annotations

import numpy as np
import pytest

from uopc.tensor import Tensor, realizer


@pytest.mark.c_backend
def test_a_linear_layers_product_and_weight_gradient_are_packed_and_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("uopc.lower.pack.PACK_MIN_WORK", 0)  # pack small products too, so the test is quick
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, 128)).astype(np.float32)
    w = rng.standard_normal((64, 128)).astype(np.float32)
    g = rng.standard_normal((12, 64)).astype(np.float32)
    weight = Tensor(w, requires_grad=True)
    y = Tensor(x) @ weight.T  # x @ W.T: W read down its rows, along k
    forward = y.numpy()
    last = next(reversed(realizer.plans.plans.values()))
    assert any(k.opts.vector is not None for k in last.kernels) and len(last.kernels) == 2  # the copy, the product
    (y * Tensor(g)).sum().backward()  # dW = g.T @ x: both operands read down their columns
    assert weight.grad is not None
    np.testing.assert_allclose(forward, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)
    want = g.T.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(weight.grad.numpy(), want, rtol=1e-4, atol=1e-4)
