"""The GPT of scripts/gpt.py against the same model in PyTorch: the loss and every parameter's gradient.

The PyTorch model is built module for module with the same names (nanoGPT's, and nn.MultiheadAttention's
inside the attention), so the uopc model's state_dict loads into it by name; both then compute the
cross-entropy of a batch, and backward. A mistake anywhere in the forward pass (the causal mask, the
position embedding's rows, the pre-norm residuals) or in a gradient rule shows as a difference.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopc.tensor import Tensor

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
from gpt import GPT, Config

torch = pytest.importorskip("torch")
tnn = torch.nn
TorchModule: Any = tnn.Module
CONFIG = Config(vocab_size=13, block_size=8, dim=16, heads=4, layers=2)


class TorchAttention(TorchModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.attn = tnn.MultiheadAttention(CONFIG.dim, CONFIG.heads, batch_first=True)

    def forward(self, x: Any) -> Any:
        blocked = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)  # True: may not look
        return self.attn(x, x, x, attn_mask=blocked, need_weights=False)[0]


class TorchBlock(TorchModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        dim = CONFIG.dim
        self.ln_1, self.attn, self.ln_2 = tnn.LayerNorm(dim), TorchAttention(), tnn.LayerNorm(dim)
        self.mlp = tnn.Sequential(tnn.Linear(dim, 4 * dim), tnn.ReLU(), tnn.Linear(4 * dim, dim))

    def forward(self, x: Any) -> Any:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(TorchModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.wte = tnn.Embedding(CONFIG.vocab_size, CONFIG.dim)
        self.wpe = tnn.Embedding(CONFIG.block_size, CONFIG.dim)
        self.h = tnn.ModuleList([TorchBlock() for _ in range(CONFIG.layers)])
        self.ln_f = tnn.LayerNorm(CONFIG.dim)
        self.lm_head = tnn.Linear(CONFIG.dim, CONFIG.vocab_size)

    def forward(self, idx: Any) -> Any:
        x = self.wte(idx) + self.wpe.weight[: idx.shape[1]]
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


@pytest.mark.parametrize("length", [CONFIG.block_size, 5])  # the whole context, and a shorter one
def test_the_gpt_loss_and_gradients_equal_pytorchs(length: int) -> None:
    Tensor.manual_seed(7)
    ours = GPT(CONFIG)
    noise = np.random.default_rng(7)
    for p in ours.parameters():  # zero biases and unit norms would hide a mix-up of two of them: make each tell
        p.uop = Tensor((p.numpy() + noise.uniform(-0.1, 0.1, p.shape)).astype(np.float32)).uop
    theirs = TorchGPT().double()
    state = {k: torch.from_numpy(v.numpy().astype(np.float64)) for k, v in ours.state_dict().items()}
    assert sorted(theirs.state_dict()) == sorted(state)  # the same names: the checkpoint loads by name
    theirs.load_state_dict(state)
    rng = np.random.default_rng(length)
    x = rng.integers(0, CONFIG.vocab_size, (3, length)).astype(np.int32)
    y = rng.integers(0, CONFIG.vocab_size, (3, length)).astype(np.int32)

    loss = ours(Tensor(x)).cross_entropy(Tensor(y))
    loss.backward()
    params = ours.state_dict()
    gradients = [p.grad for p in params.values()]
    assert all(g is not None for g in gradients)
    loss.realize(*(g for g in gradients if g is not None))  # one plan for all: a compile per gradient is minutes
    want = torch.nn.functional.cross_entropy(
        theirs(torch.from_numpy(x).long()).reshape(-1, CONFIG.vocab_size), torch.from_numpy(y).long().reshape(-1)
    )
    want.backward()

    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    grads = dict(theirs.named_parameters())
    for name, p in params.items():
        assert p.grad is not None
        np.testing.assert_allclose(p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-3, atol=1e-6, err_msg=name)
