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


@pytest.mark.c_backend
@pytest.mark.parametrize(("threads", "width"), [("1", 48), ("16", 32)])
def test_the_realizer_packs_for_the_threads_openmp_runs(
    monkeypatch: pytest.MonkeyPatch, threads: str, width: int
) -> None:
    """192 columns make 4 panels of 48 or 6 of 32 (pack.panel_width): one thread takes 48 (192 columns either
    way), sixteen take 32 (one panel each, 32 columns against 48). The count is the C backend's, OpenMP's
    OMP_NUM_THREADS, read when the plan is made; libgomp is started first, so that its own count stays."""
    Tensor(np.ones(4, np.float32)).exp().numpy()  # loads a kernel library, and with it libgomp
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    rng = np.random.default_rng(192)
    a, b = (rng.standard_normal((192, 192)).astype(np.float32) for _ in range(2))
    got = (Tensor(a) @ Tensor(b)).numpy()
    product = next(reversed(realizer.plans.plans.values())).kernels[-1]
    assert product.opts.vector is not None
    assert product.opts.upcast[product.opts.vector[0]] * product.opts.vector[1] == width
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
