"""Attention's kernels against PyTorch's scaled_dot_product_attention: values and the gradients of q, k and
v, causal and not, at odd lengths (L != S, a single position, lengths that are no power of two)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.tensor import Tensor

torch = pytest.importorskip("torch")

Array = npt.NDArray[Any]
CASES = [(2, 3, 17, 17, 8), (1, 2, 31, 19, 16), (2, 1, 5, 29, 4), (1, 1, 1, 1, 3), (1, 4, 65, 65, 64)]


@pytest.mark.parametrize("kernel", ["plain", "online", "tiled"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_attention_matches_torch(case: tuple[int, ...], causal: bool, kernel: str) -> None:
    batch, heads, length, keys, dim = case
    rng = np.random.default_rng(sum(case) + causal)
    q, k, v = (rng.standard_normal((batch, heads, n, dim)).astype(np.float32) for n in (length, keys, keys))
    w = rng.standard_normal((batch, heads, length, dim)).astype(np.float32)
    ours = [Tensor(a, requires_grad=True) for a in (q, k, v)]
    out = ours[0].scaled_dot_product_attention(ours[1], ours[2], is_causal=causal, kernel=kernel)
    (out * Tensor(w)).sum().backward()
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=causal)
    (expected * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-5, atol=2e-6)
    for mine, torch_leaf in zip(ours, theirs, strict=True):
        assert mine.grad is not None and torch_leaf.grad is not None
        np.testing.assert_allclose(mine.grad.numpy(), torch_leaf.grad.numpy(), rtol=1e-4, atol=1e-5)
