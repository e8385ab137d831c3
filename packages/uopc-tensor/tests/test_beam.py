"""BEAM=n through the Tensor library: read in one place (realize.beam_width), refused when it is no width,
and a searched plan that computes what numpy does."""

from __future__ import annotations

import numpy as np
import pytest

from uopc.tensor import Tensor, TensorError
from uopc.tensor.realize import realizer


def test_beam_must_be_a_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAM", "yes")
    with pytest.raises(TensorError, match="BEAM must be a beam width"):
        (Tensor([1.0]) * 2.0).numpy()


@pytest.mark.c_backend
def test_a_searched_step_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAM", "1")
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((16, 40)).astype(np.float32)
    searched = realizer.seconds["search"]
    got = (Tensor(x) @ Tensor(w).T).relu().sum(1).numpy()
    assert realizer.seconds["search"] > searched  # the plan's kernels were searched (none were before)
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64), 0).sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
