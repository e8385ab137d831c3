"""Benchmark one MNIST training step: uopc against PyTorch on the CPU, measured in the same run.

The models, batch size and optimizer are those of scripts/train_mnist.py (the 784-256-10 MLP and its
default CNN: 16 and 32 channels and a hidden layer of 128, AdamW, batch 128). Reports the median time of
a training step after warm-up in each framework, and, for the MLP, uopc's first step (which builds its
kernels) in a fresh process with an empty kernel cache and again with a warm one. PyTorch runs in a process
of its own: in uopc's, its libgomp would be the one uopc's kernels get, without uopc's settings (notes 163).

    python scripts/bench_mnist.py --steps 50
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import stamp
from arguments import non_negative_int, output_file, positive_int
from search_cnn import torch_cnn
from train_mnist import DEFAULTS, cnn

from uopc.tensor import realizer

BATCH, HIDDEN = 128, 256
CHANNELS, CNN_HIDDEN = int(DEFAULTS["cnn"]["channels"]), int(DEFAULTS["cnn"]["hidden"])
MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor"]  # the packages a step runs


def batch() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    return x, y


def timed_steps(step: Callable[[], None], steps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        step()
    realizer.wait_for_optimized_builds()  # uopc's steady steps run its -O3 kernels (a no-op for torch)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def uopc_step_fn(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Callable[[], None]:
    from uopc.tensor import Tensor
    from uopc.tensor.nn import Linear
    from uopc.tensor.optim import AdamW

    Tensor.manual_seed(0)
    l1, l2 = Linear(784, HIDDEN), Linear(HIDDEN, 10)
    opt = AdamW([*l1.parameters(), *l2.parameters()], lr=1e-3)

    def step() -> None:
        loss = l2(l1(Tensor(x)).relu()).cross_entropy(Tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        loss.item()

    return step


def uopc_cnn_step_fn(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Callable[[], None]:
    from uopc.tensor import Tensor
    from uopc.tensor.optim import AdamW

    Tensor.manual_seed(0)
    model = cnn(CHANNELS, CNN_HIDDEN)
    opt = AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        loss = model(Tensor(x.reshape(-1, 1, 28, 28))).cross_entropy(Tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        loss.item()

    return step


def torch_model(kind: str) -> Any:
    import torch

    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))
    return torch_cnn(CHANNELS, CNN_HIDDEN)


def torch_step_fn(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], kind: str) -> Callable[[], None]:
    import torch

    torch.manual_seed(0)
    model = torch_model(kind)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if kind == "cnn":
        x = x.reshape(-1, 1, 28, 28)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(tx), ty)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    return step


def median_ms(step: Callable[[], None], args: argparse.Namespace) -> float:
    return float(np.median(timed_steps(step, args.steps, args.warmup))) * 1e3


def torch_child(args: argparse.Namespace) -> None:
    """Run in a process of its own, which runs no uopc kernel: PyTorch's version, its threads and its median
    step for each model, as JSON."""
    import torch

    x, y = batch()
    medians = {kind: median_ms(torch_step_fn(x, y, kind), args) for kind in ("mlp", "cnn")}
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(), "medians": medians}))


def torch_steps(args: argparse.Namespace) -> dict[str, Any]:
    """torch_child's answer; empty where PyTorch is not installed."""
    if importlib.util.find_spec("torch") is None:
        return {}
    command = [sys.executable, __file__, "--torch-child", "--steps", str(args.steps), "--warmup", str(args.warmup)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def step_rows(model: str, kind: str, uopc_ms: float, pytorch: dict[str, Any]) -> list[tuple[str, str]]:
    """uopc's median step, PyTorch's and their ratio; `model` prefixes the names ("" for the MLP)."""
    rows = [(f"{model}uopc step (median)", f"{uopc_ms:.2f}")]
    if not pytorch:
        return rows
    torch_ms = pytorch["medians"][kind]
    name = f"{model}PyTorch {pytorch['version']} step (median, {pytorch['threads']} threads)"
    return [*rows, (name, f"{torch_ms:.2f}"), (f"{model}uopc step / PyTorch step", f"{uopc_ms / torch_ms:.2f}x")]


def first_step_child() -> None:
    """Run in a fresh process: the time of uopc's first step, then of its second."""
    step = uopc_step_fn(*batch())
    times = timed_steps(step, 2, 0)
    print(json.dumps(times))


def first_step(cache: str) -> list[float]:
    env = {**os.environ, "UOPC_CACHE": cache}
    done = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True)
    times: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


def main() -> None:
    p = argparse.ArgumentParser(description="ms per MNIST training step: uopc vs PyTorch (CPU), same run.")
    p.add_argument("--steps", type=positive_int, default=50, help="timed steps per framework (default 50)")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--out", type=output_file, help="also write the table to this file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        first_step_child()
        return
    if args.torch_child:
        torch_child(args)
        return
    pytorch = torch_steps(args)
    x, y = batch()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        cold = first_step(cache)
        warm = first_step(cache)
    rows.append(("uopc first step, cold kernel cache", f"{cold[0] * 1e3:.2f}"))
    rows.append(("uopc first step, warm kernel cache", f"{warm[0] * 1e3:.2f}"))
    rows += step_rows("", "mlp", median_ms(uopc_step_fn(x, y), args), pytorch)
    rows += step_rows("CNN: ", "cnn", median_ms(uopc_cnn_step_fn(x, y), args), pytorch)
    lines = [
        f"MNIST MLP 784-{HIDDEN}-10 and CNN ({CHANNELS} and {2 * CHANNELS} channels, hidden {CNN_HIDDEN}), AdamW, "
        f"batch {BATCH}, "
        f"{os.cpu_count()} CPUs",
        "",
        "| measurement | ms |",
        "| --- | ---: |",
    ]
    lines += [f"| {name} | {ms} |" for name, ms in rows]
    if not any(name.startswith("PyTorch") for name, _ in rows):
        lines.append("\nPyTorch is not installed: `pip install torch` to compare")
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if args.out:
        stamp.write(Path(args.out), table, [*(f"packages/{p}/src" for p in MEASURES), __file__])


if __name__ == "__main__":
    main()
