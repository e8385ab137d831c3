"""Benchmark two training steps in uopc, eager and captured (uopc.tensor.capture), against PyTorch eager.

The steps are issue 10's: the MLP 784-128-10 with Adam, batch 128, and the GPT of scripts/gpt.py with context
32, width 64, 2 layers, 4 heads, batch 8, AdamW (vocabulary 65, Tiny Shakespeare's). Every row runs in a
process of its own, one after another, so the two thread pools (uopc's OpenMP, PyTorch's) never share the
cores (see /work/shared/SPEED.md, "Pitfalls"); PyTorch gets the thread count uopc's kernels use. Each uopc
process starts with an empty kernel cache, so its first step (cold) includes gcc. Steady: the median of
--steps timed steps after --warmup untimed ones (for a captured step, counted after its three eager calls),
each on a new batch that the step turns into tensors, as a training loop does, and reads the loss of.

    .tools/bin/hatch -e torch run python scripts/bench_step.py --steps 50 --out docs/outputs/bench_step.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import stamp
from arguments import non_negative_int, output_file, positive_int

MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor"]  # the packages a step runs
MLP_BATCH, MLP_CLASSES = 128, 10
GPT: dict[str, int] = {"vocab": 65, "context": 32, "dim": 64, "layers": 2, "heads": 4, "batch": 8}
ROWS = [("mlp", "uopc eager"), ("mlp", "uopc captured"), ("mlp", "torch"), ("gpt", "uopc eager")]
ROWS += [("gpt", "uopc captured"), ("gpt", "torch")]

Batch = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]
Step = Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], float]


def batches(model: str, n: int) -> list[Batch]:
    rng = np.random.default_rng(0)
    if model == "mlp":
        return [
            (
                rng.standard_normal((MLP_BATCH, 784)).astype(np.float32),
                rng.integers(0, MLP_CLASSES, MLP_BATCH).astype(np.int32),
            )
            for _ in range(n)
        ]
    tokens = [rng.integers(0, GPT["vocab"], (GPT["batch"], GPT["context"] + 1)).astype(np.int32) for _ in range(n)]
    return [(t[:, :-1].copy(), t[:, 1:].copy()) for t in tokens]


def uopc_train_step(model: str) -> Callable[[Any, Any], Any]:
    """The model's training step in uopc, on tensors: forward, loss, backward, optimizer; returns the loss."""
    sys.path.append(os.path.dirname(__file__))
    from gpt import GPT as Gpt
    from gpt import Config

    from uopc.tensor import Tensor
    from uopc.tensor.nn import Linear, ReLU, Sequential
    from uopc.tensor.optim import Adam, AdamW

    Tensor.manual_seed(0)
    if model == "mlp":
        net: Any = Sequential(Linear(784, 128), ReLU(), Linear(128, 10))
        opt: Any = Adam(net.parameters(), lr=1e-3)
    else:
        config = Config(GPT["vocab"], GPT["context"], GPT["dim"], GPT["heads"], GPT["layers"])
        net = Gpt(config)
        opt = AdamW(net.parameters(), lr=1e-3)

    def step(x: Tensor, y: Tensor) -> Tensor:
        loss: Tensor = net(x).cross_entropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        return loss

    return step


def uopc_step(model: str, captured: bool) -> Step:
    from uopc.tensor import Tensor, capture

    step = uopc_train_step(model)
    run = capture(step) if captured else step
    return lambda x, y: float(run(Tensor(x), Tensor(y)).item())


def torch_step(model: str, threads: int) -> Step:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn = torch.nn
    if model == "mlp":
        net: Any = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        opt: Any = torch.optim.Adam(net.parameters(), lr=1e-3)
    else:
        net = torch_gpt(torch)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)

    def step(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> float:
        logits = net(torch.from_numpy(x))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).long().reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


def torch_gpt(torch: Any) -> Any:
    """scripts/gpt.py's model in PyTorch: embeddings, pre-norm blocks of causal attention and a 4x ReLU MLP."""
    nn, dim = torch.nn, GPT["dim"]
    base: Any = nn.Module

    class Block(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, GPT["heads"], batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:
            h = self.ln_1(x)
            mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln_2(x))

    class Model(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(GPT["vocab"], dim), nn.Embedding(GPT["context"], dim)
            self.h = nn.Sequential(*(Block() for _ in range(GPT["layers"])))
            self.ln_f, self.lm_head = nn.LayerNorm(dim), nn.Linear(dim, GPT["vocab"])

        def forward(self, idx: Any) -> Any:
            x = self.wte(idx.long()) + self.wpe.weight[: idx.shape[1]]
            return self.lm_head(self.ln_f(self.h(x)))

    return Model()


def child(model: str, who: str, steps: int, warmup: int, threads: int) -> dict[str, Any]:
    step = torch_step(model, threads) if who == "torch" else uopc_step(model, who == "uopc captured")
    data = batches(model, 3 + warmup + steps)
    start = time.perf_counter()
    step(*data[0])
    first = time.perf_counter() - start
    eager_calls = 3 if who == "uopc captured" else 1  # a captured step replays from its fourth call
    for x, y in data[1 : eager_calls + warmup]:
        step(x, y)
    if who != "torch":
        from uopc.tensor import realizer

        realizer.wait_for_optimized_builds()  # steady means the -O3 kernels, not the quick build the first steps ran
    times = []
    for x, y in data[eager_calls + warmup : eager_calls + warmup + steps]:
        start = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - start)
    result = {"first_s": first, "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3}
    return result | (plan_memory_kib() if who != "torch" else {})


def plan_memory_kib() -> dict[str, float]:
    """KiB of the buffers the process's plans allocate beyond their inputs, summed over the plans: each
    buffer its own (before memory planning) and with intermediates sharing storage (uopc.lower.plan_memory)."""
    from uopc.lower import plan_memory
    from uopc.tensor.realize import realizer

    plans = list(realizer.memory)
    separate = sum(plan_memory(p, share=False).nbytes(p.n_inputs) for p in plans)
    shared = sum(plan_memory(p).nbytes(p.n_inputs) for p in plans)
    return {"separate_kib": separate / 1024, "shared_kib": shared / 1024}


def measure(model: str, who: str, args: argparse.Namespace, threads: int) -> dict[str, Any] | None:
    """One row, in a fresh process with an empty kernel cache; None where PyTorch is not installed."""
    command = [sys.executable, __file__, "--child", model, who, "--steps", str(args.steps)]
    command += ["--warmup", str(args.warmup)]
    with tempfile.TemporaryDirectory(prefix="uopc-bench-step-") as cache:
        env = {**os.environ, "UOPC_CACHE": cache, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if who == "torch" and "No module named 'torch'" in done.stderr:
            return None
        raise SystemExit(f"{model} {who} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def table(results: dict[tuple[str, str], dict[str, Any] | None]) -> str:
    head = "| step | run | first step (s) | steady, median (ms) | min (ms) | / PyTorch (median) | / PyTorch (min) |"
    head += " plan memory, KiB: separate / shared |"
    lines = [head, "| --- | --- |" + " ---: |" * 6]
    names = {"mlp": "MLP 784-128-10, Adam, batch 128", "gpt": "GPT ctx 32, width 64, 2x4 heads, AdamW, batch 8"}
    for (model, who), r in results.items():
        if r is None:
            lines.append(f"| {names[model]} | {who} | not installed | | | | | |")
            continue
        peer = results.get((model, "torch"))
        ratios = [f"{r[k] / peer[k]:.2f}x" if peer else "n/a" for k in ("median_ms", "min_ms")]
        row = f"| {names[model]} | {who} | {r['first_s']:.2f} | {r['median_ms']:.2f} | {r['min_ms']:.2f} | "
        memory = f"{r['separate_kib']:.0f} / {r['shared_kib']:.0f}" if "shared_kib" in r else ""
        lines.append(row + " | ".join(ratios) + f" | {memory} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=positive_int, default=30, help="timed steps per row (default 30)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed steps before them (default 3)")
    p.add_argument("--out", type=output_file, help="also write the table (markdown) to this file, stamped")
    p.add_argument("--child", nargs=2, metavar=("MODEL", "RUN"), help=argparse.SUPPRESS)
    args = p.parse_args()
    threads = stamp.thread_count()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.steps, args.warmup, threads)))
        return
    results = {(model, who): measure(model, who, args, threads) for model, who in ROWS}
    header = (
        f"One training step, each row in a fresh process with an empty kernel cache, {threads} threads for uopc "
        f"and PyTorch; steady: median of {args.steps} steps after {args.warmup} untimed ones. Plan memory: the "
        "buffers all the plans of the run allocate beyond their inputs, each its own or with intermediates "
        "sharing storage as the memory plan says (the shared storage is allocated once per plan, not per step)."
    )
    text = f"{header}\n\n{table(results)}\n"
    stamp.emit(text, args.out, [*(f"packages/{p}/src" for p in MEASURES), "scripts/gpt.py", __file__])


if __name__ == "__main__":
    main()
