"""A PyTorch checkpoint loads into the same model written with uopc.tensor.nn, by name, and computes the same.

Each model is built twice, once with torch.nn and once with uopc.tensor.nn, module for module. The torch
model's state_dict is saved with safetensors, exactly as a PyTorch user would share it, and loaded into the
uopc model with `load` and `load_state_dict`, which refuse a missing, unexpected or misshapen name: so the
parameter names of Sequential, ModuleList, Conv2d, LayerNorm, Embedding and MultiHeadAttention must be
PyTorch's. Then both models run on the same input, in evaluation mode, and must agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopc.tensor import Tensor
from uopc.tensor import nn as unn

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")
tnn = torch.nn
TorchModule: Any = tnn.Module


# ---- the same two models, in each framework ----


def torch_cnn() -> Any:
    return tnn.Sequential(
        tnn.Conv2d(1, 4, 3, padding=1),
        tnn.ReLU(),
        tnn.MaxPool2d(2),
        tnn.Conv2d(4, 8, 3, stride=2, groups=2),
        tnn.GELU(),
        tnn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False),
        tnn.Flatten(),
        tnn.Linear(8 * 3 * 3, 10),
    )


def uopc_cnn() -> unn.Module:
    return unn.Sequential(
        unn.Conv2d(1, 4, 3, padding=1),
        unn.ReLU(),
        unn.MaxPool2d(2),
        unn.Conv2d(4, 8, 3, stride=2, groups=2),
        unn.GELU(),
        unn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False),
        unn.Flatten(),
        unn.Linear(8 * 3 * 3, 10),
    )


WIDTH, HEADS, LENGTH, VOCAB = 8, 2, 5, 11
BLOCKED = np.triu(np.ones((LENGTH, LENGTH), bool), 1)  # PyTorch's bool mask: True where a query may not look


class TorchBlock(TorchModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.ln = tnn.LayerNorm(WIDTH)
        self.attn = tnn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        wide = 2 * WIDTH
        self.mlp = tnn.Sequential(tnn.Linear(WIDTH, wide), tnn.GELU(approximate="tanh"), tnn.Linear(wide, WIDTH))

    def forward(self, x: Any) -> Any:
        h = self.ln(x)
        x = x + self.attn(h, h, h, attn_mask=torch.from_numpy(BLOCKED), need_weights=False)[0]
        return x + self.mlp(x)


class TorchTransformer(TorchModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.embed = tnn.Embedding(VOCAB, WIDTH)
        self.blocks = tnn.ModuleList([TorchBlock(), TorchBlock()])
        self.head = tnn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx: Any) -> Any:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class UopcBlock(unn.Module):
    def __init__(self) -> None:
        self.ln = unn.LayerNorm(WIDTH)
        self.attn = unn.MultiHeadAttention(WIDTH, HEADS, batch_first=True)
        self.mlp = unn.Sequential(unn.Linear(WIDTH, 2 * WIDTH), unn.GELU("tanh"), unn.Linear(2 * WIDTH, WIDTH))

    def forward(self, x: Tensor) -> Tensor:
        h = self.ln(x)
        x = x + self.attn(h, h, h, attn_mask=Tensor(BLOCKED), need_weights=False)[0]
        return x + self.mlp(x)


class UopcTransformer(unn.Module):
    def __init__(self) -> None:
        self.embed = unn.Embedding(VOCAB, WIDTH)
        self.blocks = unn.ModuleList([UopcBlock(), UopcBlock()])
        self.head = unn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


# ---- the test ----


def load_torch_checkpoint(theirs: Any, ours: unn.Module, path: Path) -> None:
    """theirs' state_dict through a safetensors file into ours, by name."""
    with torch.no_grad():  # PyTorch initializes some biases to 0: make every tensor tell
        for p in theirs.parameters():
            p.add_(torch.rand_like(p) * 0.2 - 0.1)
    safetensors_torch.save_file({k: v.contiguous() for k, v in theirs.state_dict().items()}, str(path))
    ours.load_state_dict(unn.load(path))
    assert list(ours.state_dict()) == sorted(theirs.state_dict())


@pytest.mark.parametrize(
    ("name", "theirs", "ours", "data"),
    [
        ("cnn", torch_cnn, uopc_cnn, lambda rng: rng.standard_normal((2, 1, 12, 12)).astype(np.float32)),
        ("transformer", TorchTransformer, UopcTransformer, lambda rng: rng.integers(0, VOCAB, (3, LENGTH))),
    ],
)
def test_a_pytorch_checkpoint_loads_by_name_and_gives_the_same_outputs(
    name: str, theirs: Any, ours: Any, data: Any, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    Tensor.manual_seed(0)
    torch_model, uopc_model = theirs().eval(), ours().eval()
    load_torch_checkpoint(torch_model, uopc_model, tmp_path / f"{name}.safetensors")
    x = data(np.random.default_rng(0))
    with torch.no_grad():
        want = torch_model(torch.from_numpy(x)).numpy()
    got = uopc_model(Tensor(x.astype(np.int32) if x.dtype.kind == "i" else x)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_misnamed_checkpoint_is_refused(tmp_path: Path) -> None:
    """The check has teeth: a checkpoint whose names are not the model's does not load."""
    torch.manual_seed(0)
    path = tmp_path / "renamed.safetensors"
    state = {f"model.{k}": v.contiguous() for k, v in torch_cnn().state_dict().items()}
    safetensors_torch.save_file(state, str(path))
    with pytest.raises(unn.CheckpointError, match="missing keys"):
        uopc_cnn().load_state_dict(unn.load(path))
