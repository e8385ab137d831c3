"""The default opts against searched ones, kernel by kernel, on the GPT-like training step.

    python scripts/bench_beam.py                                  # beam width 2, 5 timed steps
    python scripts/bench_beam.py --out docs/outputs/bench_beam.txt

Runs the training step of scripts/profile_gpt.py (the small preset: context 32, width 64, 2 layers, 4 heads,
batch 8, AdamW) with the default opts (choose_opts, and packing), and times each kernel on its own (DEBUG=2:
the median over --repeats steps). Then it plans the step again with BEAM=n, which searches every kernel's
opts (search.py in uopc-lower), and times the kernels again. It reports the seconds the search took, the
kernels' total time both ways, how many kernels the default runs within 1.5x of the searched time, and the
kernels that take longest or where the default is furthest behind.

The search's winners go into the kernel cache; by default the script uses an empty cache of its own, so that
every kernel is searched and the search time is the whole search's (--cache-from-env uses UOPC_CACHE).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import stamp
from arguments import output_file, positive_int
from gpt import GPT, Config
from profile_gpt import VOCABULARY, kernel_timings
from train_gpt import PRESETS, train_step

from uopc.lower import PlanCache
from uopc.tensor import Tensor
from uopc.tensor.optim import AdamW
from uopc.tensor.realize import realizer

MEASURES: list[str | Path] = [
    *(f"packages/{p}/src" for p in ("uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor")),
    "scripts/gpt.py",
    "scripts/profile_gpt.py",
    __file__,
]
WITHIN = 1.5  # the goal: the default no more than this many times slower than the searched kernel


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--beam", type=positive_int, default=2, help="beam width (2)")
    p.add_argument("--repeats", type=positive_int, default=5, help="steps timed kernel by kernel, each way (5)")
    p.add_argument("--rows", type=positive_int, default=12, help="kernels listed (12)")
    p.add_argument("--cache-from-env", action="store_true", help="use UOPC_CACHE (or ~/.cache/uopc), not an empty one")
    p.add_argument("--out", type=output_file, help="write the tables to this file, stamped")
    return p.parse_args(argv)


def gpt_step() -> Callable[[], None]:
    preset = PRESETS["small"]
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    config = Config(VOCABULARY, preset["block_size"], preset["dim"], preset["heads"], preset["layers"])
    model = GPT(config)
    opt = AdamW(model.parameters(), lr=1e-3)
    shape = (preset["batch_size"], preset["block_size"])

    def step() -> None:
        x, y = (rng.integers(0, VOCABULARY, shape).astype(np.int32) for _ in range(2))
        train_step(model, opt, Tensor(x), Tensor(y)).item()

    return step


def settle(step: Callable[[], None]) -> None:
    """Run the step until its plans run the optimized libraries: a large source is built quickly first and at
    -O3 in a thread (compiler.py), whose library a later run swaps in."""
    step()
    realizer.wait_for_optimized_builds()
    step()


def median_times(step: Callable[[], None], repeats: int) -> list[tuple[str, float]]:
    """(name, median ms) of each kernel the step runs, in order, over `repeats` steps."""
    runs = [kernel_timings(step) for _ in range(repeats)]
    return [(runs[0][i][0], statistics.median(r[i][1] for r in runs)) for i in range(len(runs[0]))]


def forget_plans() -> None:
    """Make the next step plan and compile again, as a new process would (with the kernel cache kept)."""
    realizer.plans = PlanCache()
    realizer.compiled = weakref.WeakKeyDictionary()


def table(default: list[tuple[str, float]], searched: list[tuple[str, float]], rows: int) -> list[str]:
    pairs = [(name, d, s) for (name, d), (_, s) in zip(default, searched, strict=True)]
    behind = sorted(pairs, key=lambda p: -p[1] / max(p[2], 1e-6))[: rows // 2]
    longest = sorted(pairs, key=lambda p: -p[1])[:rows]
    shown = longest + [p for p in behind if p not in longest]
    return [
        "| kernel | default (ms) | searched (ms) | default / searched |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {n} | {d:.3f} | {s:.3f} | {d / max(s, 1e-6):.2f}x |" for n, d, s in shown),
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.cache_from_env:
        os.environ["UOPC_CACHE"] = tempfile.mkdtemp(prefix="uopc-beam-")
    os.environ.pop("BEAM", None)
    step = gpt_step()
    settle(step)
    default = median_times(step, args.repeats)
    forget_plans()
    os.environ["BEAM"] = str(args.beam)
    before, began = realizer.seconds["search"], time.perf_counter()
    step()
    search_s, first_step_s = realizer.seconds["search"] - before, time.perf_counter() - began
    settle(step)
    searched = median_times(step, args.repeats)
    if [n for n, _ in default] != [n for n, _ in searched]:
        raise SystemExit("the searched step ran other kernels than the default one")
    within = sum(d <= WITHIN * s for (_, d), (_, s) in zip(default, searched, strict=True))
    total_d, total_s = sum(d for _, d in default), sum(s for _, s in searched)
    lines = [
        f"The GPT-like training step (small preset), its {len(default)} kernels each timed alone (DEBUG=2, median of "
        f"{args.repeats} steps), with the default opts and with opts searched by a beam of width {args.beam}.",
        "",
        "| | value |",
        "| --- | ---: |",
        f"| search time (s) | {search_s:.1f} |",
        f"| first searching step, search and compiles included (s) | {first_step_s:.1f} |",
        f"| kernels' total, default opts (ms) | {total_d:.2f} |",
        f"| kernels' total, searched opts (ms) | {total_s:.2f} |",
        f"| default / searched, total | {total_d / total_s:.2f}x |",
        f"| kernels where the default is within {WITHIN}x of searched | {within} of {len(default)} |",
        "",
        *table(default, searched, args.rows),
    ]
    text = "\n".join(lines) + "\n"
    stamp.emit(text, args.out, MEASURES)


if __name__ == "__main__":
    main()
