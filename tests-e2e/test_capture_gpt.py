"""The GPT of scripts/gpt.py trained eagerly and through capture(step), seeded alike: the same losses and
weights, bit for bit, with AdamW and a learning rate that changes at every step (set between calls)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopc.tensor import Tensor, capture
from uopc.tensor.optim import AdamW
from uopc.tensor.realize import realizer

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
from gpt import GPT, Config

CONFIG = Config(vocab_size=13, block_size=8, dim=16, heads=4, layers=2)


def train(captured: bool, steps: int) -> tuple[list[float], list[np.ndarray[Any, Any]]]:
    Tensor.manual_seed(11)
    model = GPT(CONFIG)
    opt = AdamW(model.parameters(), lr=1e-2)

    def step(x: Tensor, y: Tensor) -> Tensor:
        loss = model(x).cross_entropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        return loss

    run = capture(step) if captured else step
    rng = np.random.default_rng(5)
    losses = []
    for i in range(steps):
        tokens = rng.integers(0, CONFIG.vocab_size, (4, CONFIG.block_size + 1)).astype(np.int32)
        opt.lr = 1e-2 * (i + 1) / steps
        losses.append(run(Tensor(tokens[:, :-1]), Tensor(tokens[:, 1:])).item())
    return losses, [p.numpy() for p in model.parameters()]


def test_a_replayed_gpt_trains_as_the_eager_one_bit_for_bit() -> None:
    eager_losses, eager_weights = train(captured=False, steps=7)
    losses, weights = train(captured=True, steps=7)  # steps 4 to 7 are replays
    assert losses == eager_losses
    for got, want in zip(weights, eager_weights, strict=True):
        assert got.tobytes() == want.tobytes()


def test_a_gpt_trains_the_same_with_and_without_memory_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(realizer, "share_memory", False)
    separate = train(captured=True, steps=5)
    monkeypatch.setattr(realizer, "share_memory", True)
    realizer.memory.clear()
    planned = train(captured=True, steps=5)
    assert planned[0] == separate[0]
    for got, want in zip(planned[1], separate[1], strict=True):
        assert got.tobytes() == want.tobytes()
    step_plan = max(realizer.memory.items(), key=lambda item: len(item[0].steps))
    assert len(step_plan[1].sizes) < len(step_plan[0].buffers)  # the step's plan did share storage
