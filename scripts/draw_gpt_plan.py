"""The plan of one training step of the GPT, drawn: its kernels, the buffers between them, and their times.

    python scripts/draw_gpt_plan.py                              # the default model; writes gpt-plan.png
    python scripts/draw_gpt_plan.py --out docs/outputs/gpt_plan.png

Builds the step's plan as profile_gpt.py does, runs one more step with DEBUG=2 (each kernel timed on its own)
and draws two panels: above, every kernel as a mark in layers (a kernel sits one layer right of the last
kernel whose output it reads, and a grey line is a buffer one kernel writes and a later one reads); below,
the kernels one after another in the plan's order, each as wide as its time. Colours give the part of the
step, read from the plan itself: forward is every kernel the loss's buffer depends on, optimizer every other
kernel that writes a new parameter or optimizer state (an output of the plan), backward the rest. Shapes give
the kind of kernel: elementwise (no reduction), reduce, and matmul-like (a sum of products of two loads).
Writes the picture (stamped in its metadata) and a table of the counts beside it (.txt, stamped).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt
import numpy as np
import stamp
from arguments import output_file
from gpt import GPT, Config
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from profile_gpt import GPT_STEP_CODE, VOCABULARY, kernel_timings
from train_gpt import PRESETS, train_step

from uopc.ir import Ops
from uopc.lower import Kernel, Plan
from uopc.tensor import Tensor, realizer
from uopc.tensor.optim import AdamW

ROOT = Path(__file__).resolve().parent.parent
MEASURES = [*GPT_STEP_CODE, __file__]
PHASE_COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green"}
KIND_MARKERS = {"elementwise": "s", "reduce": "o", "matmul-like": "D"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Draw the plan of one training step of the GPT of train_gpt.py.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small", help="the model (small)")
    p.add_argument("--out", type=output_file, default=Path("gpt-plan.png"), help="the picture (gpt-plan.png)")
    return p.parse_args(argv)


def kernel_kind(kernel: Kernel) -> str:
    """matmul-like when it sums products of two loaded values, reduce for any other reduction, else elementwise."""
    nodes = kernel.ast.toposort()
    reduces = [u for u in nodes if u.op is Ops.REDUCE]
    if not reduces:
        return "elementwise"
    for r in reduces:
        body = r.src[0]
        if body.op is Ops.MUL and all(any(n.op is Ops.LOAD for n in s.toposort()) for s in body.src):
            return "matmul-like"
    return "reduce"


def step_buffers(plan: Plan, index: int) -> tuple[set[int], set[int]]:
    """The plan buffers step `index` reads and the ones it writes."""
    step = plan.steps[index]
    kernel = plan.kernels[step.kernel]
    written = {step.buffers[slot] for slot in kernel.written}
    read = {step.buffers[p.slot] for p in kernel.params if p.slot not in kernel.written}
    return read, written


def producers(plan: Plan) -> list[set[int]]:
    """For each step, the earlier steps whose output it reads (the last writer of each buffer it reads)."""
    last_writer: dict[int, int] = {}
    found = []
    for i in range(len(plan.steps)):
        read, written = step_buffers(plan, i)
        found.append({last_writer[b] for b in read if b in last_writer})
        last_writer |= dict.fromkeys(written, i)
    return found


def passed_buffers(plan: Plan) -> set[int]:
    """The plan buffers that one kernel writes and a later one reads: the edges of the drawing."""
    written: set[int] = set()
    passed: set[int] = set()
    for i in range(len(plan.steps)):
        read, wrote = step_buffers(plan, i)
        passed |= read & written
        written |= wrote
    return passed


def phases(plan: Plan, loss: int) -> list[str]:
    """Each step's part of the training step: optimizer if it writes an output of the plan other than the
    loss (plan buffer `loss`), forward if the loss depends on it, backward otherwise. The optimizer comes
    first: a kernel may compute values of two parts (the step count's, beside a scalar the forward reads)."""
    deps = producers(plan)
    forward = {i for i in range(len(plan.steps)) if loss in step_buffers(plan, i)[1]}
    for i in range(len(plan.steps) - 1, -1, -1):  # backwards: producers come before the steps they feed
        if i in forward:
            forward |= deps[i]
    outputs = set(plan.outputs) - {loss}
    return [
        "optimizer" if step_buffers(plan, i)[1] & outputs else "forward" if i in forward else "backward"
        for i in range(len(plan.steps))
    ]


def layers(deps: list[set[int]]) -> list[int]:
    """Each step's layer: one more than the highest layer among the steps it reads from (0 without any)."""
    found: list[int] = []
    for d in deps:
        found.append(1 + max((found[j] for j in d), default=-1))
    return found


def kernel_seconds(step: Callable[[], None], plan: Plan) -> list[float]:
    """Each step's time from one run of `step` with DEBUG=2, in the plan's order."""
    found = [(name, ms) for name, ms, _ in kernel_timings(step)]
    names = [plan.kernels[s.kernel].name for s in plan.steps]
    if [n for n, _ in found] != names:
        raise SystemExit(f"DEBUG=2 printed {len(found)} kernels, not the plan's {len(names)} in its order")
    return [float(ms) / 1e3 for _, ms in found]


def draw_layers(ax: Axes, deps: list[set[int]], part: list[str], kind: list[str]) -> None:
    """Each kernel at (its layer, its place among the layer's kernels in plan order), a line per buffer read."""
    layer, row, seen = layers(deps), [], dict[int, int]()
    for x in layer:
        row.append(seen.get(x, 0))
        seen[x] = row[-1] + 1
    for i, d in enumerate(deps):
        for j in d:
            ax.plot([layer[j], layer[i]], [row[j], row[i]], color="0.75", lw=0.4, zorder=1)
    for i in range(len(deps)):
        ax.scatter(layer[i], row[i], s=28, marker=KIND_MARKERS[kind[i]], color=PHASE_COLOURS[part[i]], zorder=2)
    ax.set(xlabel="layer (longest chain of kernels before it)", ylabel="kernels in the layer")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def draw_times(ax: Axes, seconds: list[float], part: list[str], kind: list[str]) -> None:
    """The kernels one after another, each as wide as its time, in the row of its kind."""
    ms = np.array(seconds) * 1e3
    rows = list(KIND_MARKERS)
    start = np.concatenate([[0.0], np.cumsum(ms)[:-1]])
    ax.barh([rows.index(k) for k in kind], ms, left=start, color=[PHASE_COLOURS[p] for p in part], height=0.8)
    ax.set(yticks=range(len(rows)), yticklabels=rows, xlabel="ms, kernels in the plan's order (DEBUG=2)")


def draw(plan: Plan, loss: int, seconds: list[float], title: str, out: Path, stamp_line: str) -> None:
    """The two panels of the module's docstring, as a PNG at `out` with `stamp_line` in its metadata."""
    part = phases(plan, loss)
    kind = [kernel_kind(plan.kernels[s.kernel]) for s in plan.steps]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), dpi=150, height_ratios=(3, 1.2))
    draw_layers(top, producers(plan), part, kind)
    draw_times(bottom, seconds, part, kind)
    ms = {p: sum(t for t, q in zip(seconds, part, strict=True) if q == p) * 1e3 for p in PHASE_COLOURS}
    legend: list[Artist] = [
        Patch(color=c, label=f"{p}: {part.count(p)} kernels, {ms[p]:.1f} ms") for p, c in PHASE_COLOURS.items()
    ]
    legend += [
        Line2D([], [], ls="", marker=m, color="0.3", label=f"{k}: {kind.count(k)}") for k, m in KIND_MARKERS.items()
    ]
    top.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.4, 1.0), fontsize=8, ncols=2)
    top.set_title(title)
    fig.tight_layout()
    fig.savefig(out, metadata={stamp.PNG_KEY: stamp_line})
    plt.close(fig)


def counts(plan: Plan, loss: int, seconds: list[float]) -> str:
    """The picture's numbers as a table: kernels and milliseconds by part and by kind."""
    part = phases(plan, loss)
    kind = [kernel_kind(plan.kernels[s.kernel]) for s in plan.steps]
    lines = ["| part | kernels | elementwise | reduce | matmul-like | ms |", "| --- |" + " ---: |" * 5]
    for p in [*PHASE_COLOURS, "whole step"]:
        mine = [i for i in range(len(part)) if p in (part[i], "whole step")]
        by_kind = [sum(1 for i in mine if kind[i] == k) for k in KIND_MARKERS]
        ms = sum(seconds[i] for i in mine) * 1e3
        lines.append(f"| {p} | {len(mine)} | {' | '.join(map(str, by_kind))} | {ms:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # the step's kernels are timed right after they are built: without this, the quick tier's (-O0) would be
    os.environ.setdefault("UOPC_TIERED", "0")
    preset = PRESETS[args.preset]
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = GPT(Config(VOCABULARY, preset["block_size"], preset["dim"], preset["heads"], preset["layers"]))
    opt = AdamW(model.parameters(), lr=1e-3)
    shape = (preset["batch_size"], preset["block_size"])

    def step() -> None:
        x, y = (rng.integers(0, VOCABULARY, shape).astype(np.int32) for _ in range(2))
        train_step(model, opt, Tensor(x), Tensor(y)).item()  # eager: one plan, timed kernel by kernel

    step()
    plan = max(realizer.plans.plans.values(), key=lambda p: len(p.steps))  # the step's: the largest plan
    loss = plan.outputs[-1]  # train_step passes the loss to opt.step last, so the plan's last output is it
    seconds = kernel_seconds(step, plan)
    title = (
        f"One training step of the {args.preset} GPT: {len(plan.steps)} kernels, "
        f"{len(passed_buffers(plan))} buffers passed between them"
    )
    table = counts(plan, loss, seconds)
    made = stamp.write(args.out.with_suffix(".txt"), f"{title}\n\n{table}\n", MEASURES)
    draw(plan, loss, seconds, title, args.out, made.line())
    print(f"{title}\n\n{table}\nwrote {args.out} and {args.out.with_suffix('.txt')}")


if __name__ == "__main__":
    main()
