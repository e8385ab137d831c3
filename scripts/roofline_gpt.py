"""The kernels of one GPT-like training step on a roofline: how fast each ran, against what the machine allows.

    python scripts/roofline_gpt.py                               # writes gpt-roofline.png and .txt beside it
    python scripts/roofline_gpt.py --out docs/outputs/gpt_roofline.png

The step is issue 10's GPT-like step, bench_step.py's: context 32, width 64, 2 layers, 4 heads, batch 8, AdamW.
One eager step builds the plan; --runs more steps run with DEBUG=2, which times each kernel alone, and a
kernel's time is its median over them. Its work is the floating-point operations of its linear program; its
traffic is the bytes of every buffer it reads or writes, counted once: the least it has to move, so its
arithmetic intensity (work / traffic) is an upper bound and its point is never left of where it belongs.

The roofs are measured in the same run, after uopc's kernels and a pause (the two thread pools must not spin
against each other, see /work/shared/SPEED.md): the compute roof is numpy's 1024 x 1024 float32 matmul on all threads
(OpenBLAS, as close to the FMA units' peak as C gets here), the memory roof numpy's copy of a 64 MiB array,
counted as bytes read plus bytes written per second, on one thread. A kernel under both roofs by far is paying
for something neither explains: the call, starting the threads, a loop too short to fill the vectors.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt
import numpy as np
import stamp
from arguments import output_file, positive_int
from draw_gpt_plan import KIND_MARKERS, PHASE_COLOURS, kernel_kind, phases, step_buffers
from gpt import GPT, Config
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from profile_gpt import GPT_STEP_CODE, kernel_timings
from train_gpt import train_step

from uopc.lower import Plan
from uopc.tensor import Tensor, realizer
from uopc.tensor.optim import AdamW

MEASURES = [*GPT_STEP_CODE, __file__]
STEP = {"vocab": 65, "context": 32, "dim": 64, "layers": 2, "heads": 4, "batch": 8}  # bench_step.py's GPT


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Draw the kernels of one GPT-like training step on a roofline.")
    p.add_argument("--runs", type=positive_int, default=5, help="timed steps; each kernel's median (5)")
    p.add_argument("--out", type=output_file, default=Path("gpt-roofline.png"), help="the picture")
    return p.parse_args(argv)


@dataclass(frozen=True)
class Roofs:
    """What this machine allows, measured by numpy: GFLOP/s of a large matmul, GB/s of copies."""

    compute: float  # 1024^3 float32 matmul, all threads
    cache: float  # copying 256 KiB, which stays in L2: the roof for the small buffers of this step
    memory: float  # copying 64 MiB, which goes to memory and back

    def seconds(self, flops: int, traffic: int) -> float:
        """The least time a kernel of this work and traffic takes with its buffers in cache."""
        return max(flops / (self.compute * 1e9), traffic / (self.cache * 1e9))


def copy_rate(mib: float, repeats: int, rng: np.random.Generator) -> float:
    """GB/s (read plus written) of numpy copying `mib` MiB of float32, median of `repeats`."""
    src = rng.standard_normal(int(mib * 2**18)).astype(np.float32)
    dst = np.empty_like(src)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        rates.append(2 * src.nbytes / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def measure_roofs(repeats: int = 9) -> Roofs:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    matmul = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        matmul.append(2 * 1024**3 / (time.perf_counter() - start) / 1e9)
    return Roofs(statistics.median(matmul), copy_rate(0.25, 50 * repeats, rng), copy_rate(64, repeats, rng))


def step_bytes(plan: Plan, index: int) -> int:
    """The bytes of every plan buffer step `index` reads or writes, each counted once."""
    read, written = step_buffers(plan, index)
    return sum(plan.buffers[b].size * plan.buffers[b].dtype.itemsize for b in read | written)


@dataclass(frozen=True)
class KernelRun:
    """One step of the plan: its kernel's name and kind, its part of the training step, its work and traffic,
    and its median time."""

    name: str
    kind: str
    part: str
    flops: int
    traffic: int
    seconds: float

    @property
    def intensity(self) -> float:
        return self.flops / self.traffic

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9


def measure(runs: int) -> list[KernelRun]:
    """Each step of the training step's plan, with its median time over `runs` timed steps."""
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = GPT(Config(STEP["vocab"], STEP["context"], STEP["dim"], STEP["heads"], STEP["layers"]))
    opt = AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        x, y = (rng.integers(0, STEP["vocab"], (STEP["batch"], STEP["context"])).astype(np.int32) for _ in "xy")
        train_step(model, opt, Tensor(x), Tensor(y)).item()

    step()
    plan = max(realizer.plans.plans.values(), key=lambda p: len(p.steps))  # the step's: the largest plan
    programs = next(iter(realizer.compiled[plan].values())).programs
    times = [[ms / 1e3 for _, ms, _ in kernel_timings(step)] for _ in range(runs)]
    if any(len(t) != len(plan.steps) for t in times):
        raise SystemExit(f"DEBUG=2 printed {sorted({len(t) for t in times})} kernels, not the plan's {len(plan.steps)}")
    seconds = [statistics.median(column) for column in zip(*times, strict=True)]
    part = phases(plan, plan.outputs[-1])  # train_step passes the loss to opt.step last: the last output
    return [
        KernelRun(
            plan.kernels[s.kernel].name,
            kernel_kind(plan.kernels[s.kernel]),
            part[i],
            programs[s.kernel].flops,
            step_bytes(plan, i),
            seconds[i],
        )
        for i, s in enumerate(plan.steps)
    ]


def draw(ax: Axes, kernels: list[KernelRun], roofs: Roofs) -> None:
    """Each kernel that does arithmetic at (intensity, GFLOP/s) under the roofs, coloured by part, shaped by kind."""
    x = np.logspace(-3, 3, 200)
    roof_lines: list[Artist] = []
    for bandwidth, label, style in [(roofs.cache, "copy in L2", "-"), (roofs.memory, "copy to memory", "--")]:
        roof_lines += ax.plot(
            x,
            np.minimum(roofs.compute, bandwidth * x),
            color="black",
            lw=1.1,
            ls=style,
            label=f"roof: numpy {label}, {bandwidth:.0f} GB/s, and matmul, {roofs.compute:.0f} GFLOP/s",
        )
    for k in kernels:
        if k.flops:  # a copy has no place on a roofline
            ax.scatter(k.intensity, k.gflops, s=22, marker=KIND_MARKERS[k.kind], color=PHASE_COLOURS[k.part])
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte moved, at least)")
    ax.set(ylabel="GFLOP/s", xlim=(1e-3, 1e3), ylim=(1e-3, roofs.compute * 3))
    ax.grid(True, which="major", lw=0.3)
    legend: list[Artist] = [*roof_lines, *(Patch(color=c, label=p) for p, c in PHASE_COLOURS.items())]
    legend += [Line2D([], [], ls="", marker=m, color="0.3", label=k) for k, m in KIND_MARKERS.items()]
    ax.legend(handles=legend, loc="lower right", fontsize=7)


def table(kernels: list[KernelRun], roofs: Roofs) -> str:
    """By kind: kernels, time, the time at the roof and the median share of it reached; then the slowest five
    (a list: the book quotes the table by row and column, and a file holds one table)."""
    lines = ["| kind | kernels | ms | ms at the roof | median share of the roof |", "| --- |" + " ---: |" * 4]
    for kind in [*KIND_MARKERS, "whole step"]:
        mine = [k for k in kernels if kind in (k.kind, "whole step")]
        at_roof = [roofs.seconds(k.flops, k.traffic) for k in mine]
        share = statistics.median(r / k.seconds for r, k in zip(at_roof, mine, strict=True)) if mine else 0.0
        ms = sum(k.seconds for k in mine) * 1e3
        lines.append(f"| {kind} | {len(mine)} | {ms:.2f} | {sum(at_roof) * 1e3:.3f} | {share:.1%} |")
    lines += ["", "The five slowest kernels:", ""]
    for k in sorted(kernels, key=lambda k: -k.seconds)[:5]:
        share = roofs.seconds(k.flops, k.traffic) / k.seconds
        lines.append(
            f"- `{k.name}` ({k.kind}, {k.part}): {k.seconds * 1e3:.3f} ms, {k.gflops:.2f} GFLOP/s at "
            f"{k.intensity:.2f} FLOP/byte, {share:.1%} of its roof"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # the step's kernels are timed right after they are built: without this, the quick tier's (-O0) would be
    os.environ.setdefault("UOPC_TIERED", "0")
    kernels = measure(args.runs)
    time.sleep(1.0)  # libgomp's threads spin a while after a parallel loop; let them sleep before numpy's
    roofs = measure_roofs()
    working = sum(1 for k in kernels if k.flops)
    title = f"One GPT-like training step: {working} of its {len(kernels)} kernels do arithmetic (median of {args.runs})"
    text = f"{title}\n\n{table(kernels, roofs)}\n"
    made = stamp.write(args.out.with_suffix(".txt"), text, MEASURES)
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=150)
    draw(ax, kernels, roofs)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, metadata={stamp.PNG_KEY: made.line()})
    print(f"{text}wrote {args.out} and {args.out.with_suffix('.txt')}")


if __name__ == "__main__":
    main()
