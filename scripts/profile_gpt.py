"""Where a training step of the GPT spends its time: Python building graphs, scheduling, or kernels.

    python scripts/profile_gpt.py                         # the default model of train_gpt.py, random batches
    python scripts/profile_gpt.py --out docs/outputs/gpt_profile.txt

Builds the step's plan with a few warm-up steps, then profiles --steps steps with cProfile and splits their
time by the functions that do each part: the forward graph (the model's calls), the backward graph
(Tensor.backward), the optimizer's update graph (the step minus its realize), normalizing the graph and
finding its plan, and running the compiled kernels. Then it runs one more step with DEBUG=2, which times
each kernel on its own, and lists the slowest. The batches are random characters: the time of a step
does not depend on which characters they are.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import stamp
from arguments import output_file, positive_int
from gpt import GPT, Config
from train_gpt import PRESETS, train_step

from uopc.tensor import Tensor
from uopc.tensor.optim import AdamW

ROOT = Path(__file__).resolve().parent.parent
# the code a GPT step's numbers depend on; the scripts that time or draw a step add themselves
GPT_STEP_CODE: list[str | Path] = [
    *(f"packages/{p}/src" for p in ("uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor")),
    "scripts/gpt.py",
    "scripts/train_gpt.py",
]
MEASURES = [*GPT_STEP_CODE, __file__]
VOCABULARY = 84  # the offline text's alphabet; Karpathy's has 65, a difference of one small matrix
# (part of the step, the function whose cumulative time it is: file suffix, function name)
PARTS = [
    ("forward graph (model calls)", ("uopc/tensor/nn.py", "__call__")),
    ("backward graph (Tensor.backward)", ("uopc/tensor/tensor.py", "backward")),
    ("optimizer step: update graph, then realize", ("uopc/tensor/optim.py", "step")),
    ("realize: normalize the graph", ("uopc/lower/kernelize.py", "normalize")),
    ("realize: run the kernels", ("uopc/backend/c/runtime.py", "run")),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Profile a training step of the GPT of scripts/train_gpt.py.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small", help="the model (small)")
    p.add_argument("--steps", type=positive_int, default=5, help="steps profiled (5)")
    p.add_argument("--warmup", type=positive_int, default=2, help="steps before, that build the plan (2)")
    p.add_argument("--kernels", type=positive_int, default=8, help="slowest kernels listed (8)")
    p.add_argument("--out", type=output_file, help="write the tables to this file, stamped")
    return p.parse_args(argv)


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    """Seconds spent in calls of the function, outermost calls only. Where a file has two functions of that
    name (Module.__call__ and MultiHeadAttention.__call__, one inside the other), the outer one's: the most."""
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    found = [v[3] for (file, _, func), v in table.items() if file.endswith(suffix) and func == name]
    return float(max(found, default=0.0))


def kernel_timings(step: Callable[[], None]) -> list[tuple[str, float, float]]:
    """(name, ms, GFLOP/s) of each kernel of one run of `step` with DEBUG=2, in the order they ran."""
    printed = io.StringIO()
    before = os.environ.get("DEBUG")
    os.environ["DEBUG"] = "2"
    try:
        with contextlib.redirect_stdout(printed):
            step()
    finally:
        if before is None:
            del os.environ["DEBUG"]
        else:
            os.environ["DEBUG"] = before
    found = re.findall(r"^\s+(\S+)\s+([\d.]+) ms\s+([\d.]+) GFLOP/s", printed.getvalue(), re.MULTILINE)
    return [(n, float(ms), float(g)) for n, ms, g in found]


def slowest_kernels(step: Callable[[], None], count: int) -> list[tuple[str, float, float]]:
    """(name, ms, GFLOP/s) of the `count` slowest kernels of one step run with DEBUG=2."""
    return sorted(kernel_timings(step), key=lambda k: -k[1])[:count]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # the steady state is profiled: without this, the first steps would run the quick tier's (-O0) kernels
    os.environ.setdefault("UOPC_TIERED", "0")
    preset = PRESETS[args.preset]
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    config = Config(VOCABULARY, preset["block_size"], preset["dim"], preset["heads"], preset["layers"])
    model = GPT(config)
    opt = AdamW(model.parameters(), lr=1e-3)
    shape = (preset["batch_size"], preset["block_size"])

    def step() -> None:
        x, y = (rng.integers(0, VOCABULARY, shape).astype(np.int32) for _ in range(2))
        train_step(model, opt, Tensor(x), Tensor(y)).item()

    for _ in range(args.warmup):
        step()
    profile = cProfile.Profile()
    began = time.perf_counter()
    for _ in range(args.steps):
        profile.runcall(step)
    total = (time.perf_counter() - began) / args.steps
    stats = pstats.Stats(profile)
    rows = [(part, cumulative(stats, *where) / args.steps) for part, where in PARTS]
    lines = [
        f"One training step of the {args.preset} GPT ({args.steps} steps profiled with cProfile, per step; "
        f"cProfile's own overhead included), then one step with DEBUG=2 for the kernels.",
        "",
        "| part of the step | ms | share |",
        "| --- | ---: | ---: |",
        f"| whole step | {total * 1e3:.1f} | 100% |",
        *(f"| {part} | {s * 1e3:.1f} | {s / total:.0%} |" for part, s in rows),
        "",
        "| slowest kernels | ms | GFLOP/s |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {ms:.2f} | {g:.2f} |" for name, ms, g in slowest_kernels(step, args.kernels)),
    ]
    text = "\n".join(lines) + "\n"
    stamp.emit(text, args.out, MEASURES)


if __name__ == "__main__":
    main()
