"""How long the first training step of a fresh process takes: the compiler's start-up, stage by stage.

Two steps: the MNIST MLP's (784-256-10, AdamW, batch 128, as scripts/train_mnist.py) and a small GPT's
(context 32, width 64, 2 layers of 4 heads with a 4x MLP, batch 8, character vocabulary 65, AdamW; 110,529
parameters). Each runs in a fresh Python process, once with an empty kernel cache (cold: every plan is made
and built) and once more with the cache that run filled (warm). The first step's time is split by stage,
as the realizer records them (realizer.seconds): schedule (normalize and plan), opts, linearize, render,
compile (gcc, or the cache lookup), load, run; "other" is the rest (building the graph, autodiff, the
loss's copy to numpy). "steady" is the median of the following steps, once the optimized build (Chapter 5's
tiers) has been swapped in.

Where torch is installed, the same steps run under torch.compile in the same run, cold (an empty inductor
cache) and warm: the `torch` hatch environment has torch, so

    .tools/bin/hatch -e torch run python scripts/bench_compile.py --out docs/outputs/bench_compile.txt
    .tools/bin/hatch run python scripts/bench_compile.py --models gpt --repeats 3   # uopc only, median of 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import stamp
from arguments import output_file, positive_int

MODELS = ("mlp", "gpt")
STAGES = ("schedule", "opts", "linearize", "render", "compile", "load", "run")
MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor"]  # the packages a step goes through
MLP_BATCH, MLP_HIDDEN = 128, 256
CTX, WIDTH, LAYERS, HEADS, BATCH, VOCAB = 32, 64, 2, 4, 8, 65


def uopc_gpt() -> Any:
    """The GPT-like model in uopc: pre-norm blocks of causal attention and a GELU MLP."""
    from uopc.tensor import Tensor
    from uopc.tensor.nn import Embedding, LayerNorm, Linear, Module

    class Block(Module):
        def __init__(self) -> None:
            self.ln1, self.ln2 = LayerNorm(WIDTH), LayerNorm(WIDTH)
            self.qkv, self.proj = Linear(WIDTH, 3 * WIDTH), Linear(WIDTH, WIDTH)
            self.fc, self.out = Linear(WIDTH, 4 * WIDTH), Linear(4 * WIDTH, WIDTH)

        def forward(self, x: Tensor) -> Tensor:
            b, t, c = x.shape
            h = self.qkv(self.ln1(x)).reshape(b, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
            q, k, v = h[0], h[1], h[2]
            scores = q @ k.transpose(-2, -1) / math.sqrt(c // HEADS)
            causal = Tensor.arange(t).reshape(t, 1) >= Tensor.arange(t).reshape(1, t)
            a = causal.where(scores, -math.inf).softmax(-1) @ v
            x = x + self.proj(a.permute(0, 2, 1, 3).reshape(b, t, c))
            return x + self.out(self.fc(self.ln2(x)).gelu())

    class GPT(Module):
        def __init__(self) -> None:
            self.tok, self.pos = Embedding(VOCAB, WIDTH), Embedding(CTX, WIDTH)
            self.blocks = [Block() for _ in range(LAYERS)]
            self.ln, self.head = LayerNorm(WIDTH), Linear(WIDTH, VOCAB)

        def forward(self, idx: Tensor) -> Tensor:
            b, t = idx.shape
            x = self.tok(idx) + self.pos(Tensor.arange(t).reshape(1, t).expand(b, t))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def torch_gpt() -> Any:
    """The same model in PyTorch (GELU with the tanh approximation, as uopc's)."""
    import torch
    from torch import nn

    class Block(nn.Module):  # type: ignore[misc]  # torch is untyped where it is not installed
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            h = self.qkv(self.ln1(x)).reshape(b, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
            q, k, v = h[0], h[1], h[2]
            scores = q @ k.transpose(-2, -1) / math.sqrt(c // HEADS)
            causal = torch.arange(t).reshape(t, 1) >= torch.arange(t).reshape(1, t)
            a = torch.where(causal, scores, -math.inf).softmax(-1) @ v
            x = x + self.proj(a.permute(0, 2, 1, 3).reshape(b, t, c))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, WIDTH), nn.Embedding(CTX, WIDTH)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB)

        def forward(self, idx: Any) -> Any:
            b, t = idx.shape
            x = self.tok(idx) + self.pos(torch.arange(t).reshape(1, t).expand(b, t))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def data(model: str, rng: np.random.Generator) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A batch of new inputs and labels: images and digits for the MLP, characters for the GPT."""
    if model == "mlp":
        return rng.standard_normal((MLP_BATCH, 784)).astype(np.float32), rng.integers(0, 10, MLP_BATCH).astype(np.int32)
    return rng.integers(0, VOCAB, (BATCH, CTX)).astype(np.int32), rng.integers(0, VOCAB, (BATCH, CTX)).astype(np.int32)


def uopc_step(model: str) -> tuple[Callable[[], float], int]:
    """A training step in uopc, and the model's parameter count."""
    from uopc.tensor import Tensor
    from uopc.tensor.nn import Linear
    from uopc.tensor.optim import AdamW

    Tensor.manual_seed(0)
    if model == "mlp":
        l1, l2 = Linear(784, MLP_HIDDEN), Linear(MLP_HIDDEN, 10)
        params = [*l1.parameters(), *l2.parameters()]

        def loss_of(x: Tensor, y: Tensor) -> Tensor:
            return l2(l1(x).relu()).cross_entropy(y)
    else:
        gpt = uopc_gpt()
        params = gpt.parameters()

        def loss_of(x: Tensor, y: Tensor) -> Tensor:
            loss: Tensor = gpt(x).cross_entropy(y)
            return loss

    opt = AdamW(params, lr=1e-3)
    rng = np.random.default_rng(0)

    def step() -> float:
        x, y = data(model, rng)
        loss = loss_of(Tensor(x), Tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)  # the loss in the same plan as the update: one plan per step
        return loss.item()

    return step, sum(p.numel() for p in params)


def torch_step(model: str) -> tuple[Callable[[], float], int]:
    """The same training step with the model and loss under torch.compile (backward compiled with them by
    AOTAutograd; the optimizer runs eagerly)."""
    import torch

    torch.manual_seed(0)
    if model == "mlp":
        net: Any = torch.nn.Sequential(
            torch.nn.Linear(784, MLP_HIDDEN), torch.nn.ReLU(), torch.nn.Linear(MLP_HIDDEN, 10)
        )
    else:
        net = torch_gpt()

    def loss_of(x: Any, y: Any) -> Any:
        logits = net(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    compiled = torch.compile(loss_of)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)

    def step() -> float:
        x, y = data(model, rng)
        tx = torch.from_numpy(x if model == "mlp" else x.astype(np.int64))  # embeddings take int64 in torch
        loss = compiled(tx, torch.from_numpy(y.astype(np.int64)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.item())

    return step, sum(p.numel() for p in net.parameters())


def cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (gcc): above the wall time when they ran
    in parallel, and less sensitive than it to other work on the machine."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def child(framework: str, model: str, steps: int) -> dict[str, Any]:
    """Run in a fresh process: import, build the model, time its first step by stage, then `steps` more."""
    start = time.perf_counter()
    seconds: Any = {}
    if framework == "uopc":
        from uopc.tensor import realizer

        seconds = realizer.seconds
    else:
        import torch  # noqa: F401
    imported = time.perf_counter()
    step, params = (uopc_step if framework == "uopc" else torch_step)(model)
    before = dict(seconds)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    loss = step()
    first, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    stages = {s: seconds.get(s, 0.0) - before.get(s, 0.0) for s in STAGES} if framework == "uopc" else {}
    kernels = 0
    if framework == "uopc":
        from uopc.tensor import realizer

        kernels = max((len(plan.steps) for plan in realizer.plans.plans.values()), default=0)
        realizer.wait_for_optimized_builds()  # steady: the -O3 kernels the first steps' quick build is swapped for
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {
        "import_s": imported - start,
        "first_s": first,
        "cpu_s": cpu,
        "stages": stages,
        "kernels": kernels,
        "params": params,
        "loss": loss,
        "steady_ms": statistics.median(times) * 1e3 if times else math.nan,
    }


def run_child(framework: str, model: str, cache: Path, steps: int) -> dict[str, Any]:
    """`child` in a fresh process whose kernel cache (uopc) or inductor cache (torch) is `cache`."""
    env = {**os.environ, "UOPC_CACHE": str(cache / "uopc"), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor")}
    command = [sys.executable, __file__, "--child", f"{framework}:{model}", "--steps", str(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{framework} {model}: the child process failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def cold_and_warm(framework: str, model: str, repeats: int, steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cold and the warm run whose first step took the median time of `repeats` pairs of runs."""
    pairs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="uopc-bench-compile-") as folder:
            cold = run_child(framework, model, Path(folder), steps)
            warm = run_child(framework, model, Path(folder), steps)
        pairs.append((cold, warm))
    cold = sorted((c for c, _ in pairs), key=lambda m: m["first_s"])[len(pairs) // 2]
    warm = sorted((w for _, w in pairs), key=lambda m: m["first_s"])[len(pairs) // 2]
    return cold, warm


def row(name: str, start: str, m: dict[str, Any]) -> str:
    stages = m["stages"]
    cells = [f"{stages[s]:.2f}" for s in STAGES] if stages else ["" for _ in STAGES]
    other = f"{m['first_s'] - sum(stages.values()):.2f}" if stages else ""
    kernels = str(m["kernels"]) if stages else ""
    return (
        f"| {name} | {start} | {m['import_s']:.2f} | **{m['first_s']:.2f}** | {m['cpu_s']:.2f} | {' | '.join(cells)} "
        f"| {other} "
        f"| {kernels} | {m['steady_ms']:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,gpt", help="comma-separated, of: mlp, gpt (default both)")
    parser.add_argument(
        "--repeats", type=positive_int, default=1, help="pairs of cold and warm runs; the median is shown (default 1)"
    )
    parser.add_argument("--steps", type=positive_int, default=5, help="steps after the first, for 'steady' (default 5)")
    parser.add_argument("--no-torch", action="store_true", help="skip torch.compile even where torch is installed")
    parser.add_argument("--out", type=output_file, help="also write the table (markdown) to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = args.models.split(",")
    if not set(models) <= set(MODELS) or not models:
        parser.error(f"argument --models: {args.models!r} must name some of {', '.join(MODELS)}")
    if args.child:
        framework, model = args.child.split(":")
        print(json.dumps(child(framework, model, args.steps)))
        return
    frameworks = ["uopc"]
    if not args.no_torch and importlib.util.find_spec("torch") is not None:
        frameworks.append("torch")
    lines = []
    for model in models:
        for framework in frameworks:
            cold, warm = cold_and_warm(framework, model, args.repeats, args.steps)
            name = f"{model.upper()} {'uopc' if framework == 'uopc' else 'torch.compile'}"
            lines += [row(name, "cold", cold), row(name, "warm", warm)]
            print(lines[-2], lines[-1], sep="\n", flush=True)
    head = [
        f"First training step of a fresh process, in seconds; {stamp.thread_count()} threads; median of "
        f"{args.repeats} pair{'s' if args.repeats > 1 else ''} of runs. CFLAGS={os.environ.get('CFLAGS', 'default')}",
        "",
        "| step | cache | import | **first step** | CPU | " + " | ".join(STAGES) + " | other | kernels | steady (ms) |",
        "| --- | --- | " + "---: | " * (len(STAGES) + 5) + "---: |",
    ]
    text = "\n".join(head + lines) + "\n"
    print()
    stamp.emit(text, args.out, [*(f"packages/{p}/src" for p in MEASURES), __file__])


if __name__ == "__main__":
    main()
