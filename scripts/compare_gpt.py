"""uopc beside PyTorch, torch.compile and tinygrad: one training step of the GPT of scripts/train_gpt.py.

    python scripts/compare_gpt.py                                  # every framework, the default model
    python scripts/compare_gpt.py --frameworks uopc,uopc-eager,torch --steps 5
    hatch run compare:gpt --out docs/outputs/compare_gpt.txt       # the book's table (torch and tinygrad there)

A step is the forward pass, the cross-entropy, the backward pass and AdamW's update (uopc's replayed by
capture, as train_gpt.py runs it, and again eager), from the same initial
weights (uopc's, loaded into each framework by their state_dict names) on the same batch. Each framework runs
in a fresh process of its own, one after another, with its compiler caches in a new empty folder and the same
number of threads: separate processes also keep one framework's spinning thread pool from slowing the next.
Each process times its first step (cold: building and compiling included), then --warmup more steps (and,
for uopc, waits for its -O3 build and runs one more step on it), then the median of --steps steps. The
losses of the first two steps check that the frameworks compute the same thing: the first is the forward
pass of the shared weights, the second comes after one AdamW update.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import re
import shutil
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
from profile_gpt import GPT_STEP_CODE, VOCABULARY
from train_gpt import PRESETS

from uopc.tensor import realizer

ROOT = Path(__file__).resolve().parent.parent
MEASURES = [*GPT_STEP_CODE, __file__]
FRAMEWORKS = ("uopc", "uopc-eager", "torch", "torch.compile", "tinygrad")
# tinygrad's CPU device with its own x86 code generator. Its other code generators did not work on this
# machine: the default writes C for clang, which is not installed (with gcc standing in, its kernels did not
# compile), and CPU:LLVM writes IR that the libLLVM it loads here (15) refuses (a vector store through a
# float pointer). The device also builds a few helper programs of its runtime (signals, a worker loop) with
# clang, or with $CC: GCC_AS_CLANG lets gcc stand in, dropping clang's --target flag and writing the object
# through a file (gcc's assembler cannot write to stdout).
TINYGRAD_DEVICE = "CPU:X86"
GCC_AS_CLANG = """#!{python}
import pathlib, subprocess, sys, tempfile
args = [a for a in sys.argv[1:] if not a.startswith("--target=")]
with tempfile.TemporaryDirectory() as folder:
    args[args.index("-o") + 1] = out = folder + "/out.o"
    subprocess.run(["gcc", *args], check=True)
    sys.stdout.buffer.write(pathlib.Path(out).read_bytes())
"""
LR = 1e-2  # the small preset's peak learning rate; no weight decay, as in train_gpt.py's default
Step = Callable[[], float]  # one training step on the fixed batch; returns its loss


def framework_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(FRAMEWORKS)}, separated by commas")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="One GPT training step in uopc, PyTorch, torch.compile and tinygrad.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small", help="the model of train_gpt.py (small)")
    p.add_argument("--layers", type=positive_int, help="transformer blocks (the preset's)")
    p.add_argument("--dim", type=positive_int, help="width of the residual stream (the preset's)")
    p.add_argument("--heads", type=positive_int, help="attention heads (the preset's)")
    p.add_argument("--block-size", type=positive_int, help="characters of context (the preset's)")
    p.add_argument("--batch-size", type=positive_int, help="sequences per step (the preset's)")
    p.add_argument("--frameworks", type=framework_list, default=list(FRAMEWORKS), help="comma-separated (all)")
    p.add_argument("--steps", type=positive_int, default=20, help="steps timed after the warm-up (20)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="steps after the first, not timed (3)")
    p.add_argument("--threads", type=positive_int, default=2, help="threads each framework may use (2)")
    p.add_argument("--out", type=output_file, help="write the table to this file, stamped")
    p.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)  # one framework, in its own process
    p.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)  # the worker's weights and batch
    args = p.parse_args(argv)
    for key in ("layers", "dim", "heads", "block_size", "batch_size"):
        if getattr(args, key) is None:
            setattr(args, key, PRESETS[args.preset][key])
    if args.dim % args.heads:
        p.error(f"argument --heads: {args.heads} heads do not divide the width {args.dim}")
    return args


# ---- the workers: one framework's model, loaded by name, and its training step ----


def uopc_step(inputs: dict[str, Any], config: dict[str, int], replay: bool) -> Step:
    """train_gpt.py's step: captured and replayed from the fourth call on (Chapter 12), or eager, building
    its graphs at every call."""
    from gpt import GPT, Config
    from train_gpt import train_step

    from uopc.tensor import Tensor, capture
    from uopc.tensor.optim import AdamW

    model = GPT(Config(**config))
    model.load_state_dict(inputs["weights"])
    opt = AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    step = functools.partial(train_step, model, opt)
    one_step = capture(step) if replay else step
    return lambda: float(one_step(Tensor(inputs["x"]), Tensor(inputs["y"])).item())


def torch_model(config: dict[str, int]) -> Any:
    """The GPT as PyTorch modules with the same tree of names, so uopc's state_dict loads by name."""
    import torch
    from torch import nn

    dim = config["dim"]
    base: Any = nn.Module  # torch has no types here: subclasses of its Module are of an Any

    class Attention(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, config["heads"], batch_first=True)

        def forward(self, x: Any) -> Any:
            blocked = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)  # True: may not look
            return self.attn(x, x, x, attn_mask=blocked, need_weights=False)[0]

    class Block(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(dim), Attention(), nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(config["vocab_size"], dim)
            self.wpe = nn.Embedding(config["block_size"], dim)
            self.h = nn.ModuleList([Block() for _ in range(config["layers"])])
            self.ln_f = nn.LayerNorm(dim)
            self.lm_head = nn.Linear(dim, config["vocab_size"])

        def forward(self, idx: Any) -> Any:
            x = self.wte(idx) + self.wpe.weight[: idx.shape[1]]
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def torch_step(inputs: dict[str, Any], config: dict[str, int], compiled: bool) -> Step:
    """PyTorch eager, or with torch.compile on the loss (its backward compiled by AOTAutograd) and on the
    optimizer's step, as PyTorch's tutorial on compiling the optimizer does."""
    import torch

    model = torch_model(config)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in inputs["weights"].items()}, strict=True)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    x, y = (torch.from_numpy(inputs[k]).long() for k in ("x", "y"))

    def loss_of(x: Any, y: Any) -> Any:
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    loss_fn, update = (torch.compile(loss_of), torch.compile(opt.step)) if compiled else (loss_of, opt.step)

    def step() -> float:
        loss = loss_fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        update()
        return float(loss.item())

    return step


def tinygrad_step(inputs: dict[str, Any], config: dict[str, int]) -> Step:
    """tinygrad's own layers under the same names, the step captured by TinyJit (its replay of kernels
    without Python, from the third call on)."""
    from tinygrad import Context, Tensor, TinyJit, nn
    from tinygrad.nn.state import get_parameters, get_state_dict

    dim, heads = config["dim"], config["heads"]

    class MultiheadAttention:  # nn.MultiheadAttention's parameters: the q, k and v projections stacked
        def __init__(self) -> None:
            self.in_proj_weight, self.in_proj_bias = Tensor.empty(3 * dim, dim), Tensor.empty(3 * dim)
            self.out_proj = nn.Linear(dim, dim)

        def __call__(self, x: Any) -> Any:
            (b, t, _), size = x.shape, dim // heads
            q, k, v = x.linear(self.in_proj_weight.T, self.in_proj_bias).chunk(3, dim=-1)
            q, k, v = (z.reshape(b, t, heads, size).transpose(1, 2) for z in (q, k, v))
            y = q.scaled_dot_product_attention(k, v, is_causal=True)
            return self.out_proj(y.transpose(1, 2).reshape(b, t, dim))

    class Attention:
        def __init__(self) -> None:
            self.attn = MultiheadAttention()

    class Block:
        def __init__(self) -> None:
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(dim), Attention(), nn.LayerNorm(dim)
            self.mlp = [nn.Linear(dim, 4 * dim), Tensor.relu, nn.Linear(4 * dim, dim)]

        def __call__(self, x: Any) -> Any:
            x = x + self.attn.attn(self.ln_1(x))
            return x + self.ln_2(x).sequential(self.mlp)

    class GPT:
        def __init__(self) -> None:
            self.wte = nn.Embedding(config["vocab_size"], dim)
            self.wpe = nn.Embedding(config["block_size"], dim)
            self.h = [Block() for _ in range(config["layers"])]
            self.ln_f, self.lm_head = nn.LayerNorm(dim), nn.Linear(dim, config["vocab_size"])

        def __call__(self, idx: Any) -> Any:
            x = self.wte(idx) + self.wpe.weight[: idx.shape[1]]
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    model = GPT()
    state = get_state_dict(model)
    if sorted(state) != sorted(inputs["weights"]):
        raise SystemExit(f"tinygrad model's names differ: {sorted(set(state) ^ set(inputs['weights']))}")
    for name, t in state.items():
        t.assign(Tensor(inputs["weights"][name])).realize()
    opt = nn.optim.AdamW(get_parameters(model), lr=LR, weight_decay=0.0)
    x, y = Tensor(inputs["x"]), Tensor(inputs["y"])

    def step(x: Any, y: Any) -> Any:
        with Context(TRAINING=1):  # tinygrad's optimizers refuse to step outside training mode
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            return loss.realize(*opt.schedule_step())  # one schedule: the loss is read before the update

    jitted = TinyJit(step)
    return lambda: float(jitted(x, y).item())


def make_step(framework: str, inputs: dict[str, Any], config: dict[str, int]) -> Step:
    if framework.startswith("uopc"):
        return uopc_step(inputs, config, replay=framework == "uopc")
    if framework == "tinygrad":
        return tinygrad_step(inputs, config)
    return torch_step(inputs, config, compiled=framework == "torch.compile")


def measure(step: Step, steps: int, warmup: int) -> dict[str, Any]:
    """The first step's time (cold), the losses of the first two steps, the median time of `steps` more,
    taken after the warm-up steps, uopc's -O3 build and one step more."""
    began = time.perf_counter()
    losses = [step()]
    first = time.perf_counter() - began
    losses.append(step())
    for _ in range(max(0, warmup - 1)):
        step()
    realizer.wait_for_optimized_builds()  # uopc's: its first steps ran quick builds (Chapter 5); a no-op for the others
    step()
    times = []
    for _ in range(steps):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    return {"first_ms": first * 1e3, "steady_ms": float(np.median(times)) * 1e3, "losses": losses}


def run_worker(args: argparse.Namespace) -> None:
    """In the framework's own process: load the inputs, build the step, measure it, print one JSON line."""
    stored = np.load(args.inputs / "inputs.npz")
    weights = {k.removeprefix("w:"): stored[k] for k in stored.files if k.startswith("w:")}
    inputs = {"weights": weights, "x": stored["x"], "y": stored["y"]}
    config = json.loads((args.inputs / "config.json").read_text())
    if args.worker.startswith("torch"):
        import torch

        torch.set_num_threads(args.threads)
    result = measure(make_step(args.worker, inputs, config), args.steps, args.warmup)
    print(json.dumps(result))


# ---- the parent: shared inputs, one process per framework, the table ----


def write_inputs(args: argparse.Namespace, folder: Path) -> dict[str, int]:
    """uopc's initial weights (seed 0) and one batch of random characters, for every framework."""
    from gpt import GPT, Config

    from uopc.tensor import Tensor

    config = Config(VOCABULARY, args.block_size, args.dim, args.heads, args.layers)
    Tensor.manual_seed(0)
    arrays: dict[str, Any] = {f"w:{k}": v.numpy() for k, v in GPT(config).state_dict().items()}
    rng = np.random.default_rng(0)
    for name in ("x", "y"):
        arrays[name] = rng.integers(0, VOCABULARY, (args.batch_size, args.block_size)).astype(np.int32)
    np.savez(folder / "inputs.npz", **arrays)
    fields = {"vocab_size": VOCABULARY, "block_size": args.block_size, "dim": args.dim}
    fields |= {"heads": args.heads, "layers": args.layers}
    (folder / "config.json").write_text(json.dumps(fields))
    return fields


def worker_env(framework: str, threads: int, folder: Path) -> dict[str, str]:
    """The same thread count for every framework, and its compiler caches in a new empty folder."""
    cache = folder / f"cache-{framework}"
    cache.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "UOPC_CACHE": str(cache / "uopc")}
    env |= {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "CACHEDB": str(cache / "tinygrad.db")}
    env |= {"XDG_CACHE_HOME": str(cache), "NUM_CPU_THREADS": str(threads)}  # the last one: tinygrad's
    if framework == "tinygrad":
        env["DEV"] = TINYGRAD_DEVICE
        if shutil.which("clang") is None and "CC" not in os.environ:
            shim = folder / "gcc-as-clang"
            shim.write_text(GCC_AS_CLANG.format(python=sys.executable))
            shim.chmod(0o755)
            env["CC"] = str(shim)
    return env


def run_framework(framework: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The worker's result, or {"error": why} when it could not run (not installed, no compiler)."""
    argv = [sys.executable, __file__, "--worker", framework, "--inputs", str(folder)]
    argv += ["--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=worker_env(framework, args.threads, folder), check=False
    )
    last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    if not last:
        return {"error": failure_reason(done.stderr, done.returncode)}
    return dict(json.loads(last[0]))


def failure_reason(stderr: str, status: int) -> str:
    """The line of a worker's error output that says why it failed: the last `SomeError: ...` line, as a
    traceback may end in a quoted source line and a caret under it."""
    lines = stderr.strip().splitlines() or [f"exit status {status}"]
    errors = [line for line in lines if re.match(r"[\w.]+(Error|Exception|Exit)\b", line)]
    return (errors or lines)[-1][:160]


def tinygrad_version() -> str:
    try:
        return importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def table(args: argparse.Namespace, results: dict[str, dict[str, Any]]) -> str:
    base = results.get("uopc", {})
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append(f"| {name} | - | - | - | - | - | did not run: {r['error'].replace('|', '/')} |")
            continue
        ratio = f"{base['steady_ms'] / r['steady_ms']:.2f}x" if "steady_ms" in base else "-"
        diffs = [abs(a - b) for a, b in zip(r["losses"], base.get("losses", r["losses"]), strict=True)]
        rows.append(
            f"| {name} | {r['first_ms']:.0f} | {r['steady_ms']:.1f} | {ratio} | {r['losses'][0]:.6f} "
            f"| {r['losses'][1]:.6f} | {max(diffs):.1e} |"
        )
    return "\n".join(
        [
            f"One training step (forward, cross-entropy, backward, AdamW) of the {args.preset} GPT: {args.layers} "
            f"layers, width {args.dim}, {args.heads} heads, batch {args.batch_size} x {args.block_size} characters "
            f"of a {VOCABULARY}-character alphabet; {args.threads} threads; each framework in a fresh process "
            f"with empty caches. Steady: median of {args.steps} steps after {args.warmup + 1} (uopc's: and its -O3 "
            "build). torch.compile: "
            f"the loss and the optimizer's step compiled (inductor, C++ through gcc); tinygrad {tinygrad_version()}: "
            f"the step under TinyJit on DEV={TINYGRAD_DEVICE} (its own x86 code generator, the only one of its CPU "
            f"compilers that works here: no clang, and its LLVM IR is refused by libLLVM 15).",
            "",
            "| framework | first step (ms) | steady (ms/step) | speed vs uopc | loss, step 1 | loss, step 2 "
            "| max loss difference from uopc |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
        ]
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    with tempfile.TemporaryDirectory(prefix="compare_gpt-") as tmp:
        folder = Path(tmp)
        write_inputs(args, folder)
        results = {}
        for framework in args.frameworks:
            results[framework] = run_framework(framework, args, folder)
            print(f"{framework}: {json.dumps(results[framework])}", file=sys.stderr, flush=True)
    text = table(args, results) + "\n"
    stamp.emit(text, args.out, MEASURES)


if __name__ == "__main__":
    main()
