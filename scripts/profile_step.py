"""Where a captured training step spends its time: bookkeeping in Python, checks, or kernels.

The steps are scripts/bench_step.py's (the MLP and the GPT-like model), captured (uopc.tensor.capture). After
the three eager calls and a warm-up, --steps replays are timed, then profiled with cProfile: the functions
with the most time of their own, per step. Then each kernel of the step's launches runs alone (the fastest
of five runs, on the launch's own buffers), which says how the kernel time divides: how many kernels
there are, how many take under 50 microseconds (a thread pool's wake-up costs about that), and the slowest,
with their work and the sizes of their buffers.

    python scripts/profile_step.py                       # both models
    python scripts/profile_step.py --model gpt --steps 50 --out docs/outputs/profile_step.txt
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from pathlib import Path
from typing import Any

import bench_step
import stamp
from arguments import output_file, positive_int

from uopc.tensor import Tensor, capture, realizer

MEASURES: list[str | Path] = [*(f"packages/uopc-{p}/src" for p in ("lower", "backend-c", "tensor")), __file__]
SHORT_S = 50e-6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["mlp", "gpt", "both"], default="both")
    p.add_argument("--steps", type=positive_int, default=20, help="replays timed, and as many profiled (20)")
    p.add_argument("--kernels", type=positive_int, default=8, help="slowest kernels listed (8)")
    p.add_argument("--out", type=output_file, help="also write the tables to this file, stamped")
    return p.parse_args(argv)


def own_time_rows(profile: cProfile.Profile, steps: int, count: int = 6) -> list[str]:
    """The functions with the most time of their own (not counting what they call), per step."""
    stats = pstats.Stats(profile, stream=io.StringIO())
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(table.items(), key=lambda kv: -kv[1][2])[:count]
    return [f"| `{func}` ({file.split('/')[-1]}:{line}) | {v[2] / steps * 1e3:.3f} |" for (file, line, func), v in rows]


def kernel_rows(run: Any, count: int) -> list[str]:
    """Each kernel of the replay's launches run alone: a summary row, then the slowest `count`. The kernel's
    function is called directly, on pointers found before the clock starts: through `run_kernel`, which
    checks the arrays first, each call cost some 15 microseconds of Python, which made a plan of 179 small
    kernels look launch-bound (notes 146); the plan itself calls them from C."""
    found = []
    for launch in run.replay.launches:
        executable = launch.compiled.executable
        for s in launch.plan.steps:
            args = [launch.buffers[b] for b in s.buffers]
            executable.run_kernel(s.kernel, args)  # checks the arrays once
            function, pointers = executable.functions[s.kernel], [a.ctypes.data for a in args]
            times = []
            for _ in range(5):
                start = time.perf_counter()
                function(*pointers)
                times.append(time.perf_counter() - start)
            program = launch.compiled.programs[s.kernel]
            found.append((min(times), program.name, program.flops, [a.size for a in args]))
    found.sort(key=lambda k: -k[0])
    short = [k for k in found if k[0] < SHORT_S]
    lines = [
        f"{len(found)} kernels, {sum(k[0] for k in found) * 1e3:.2f} ms run one by one; {len(short)} of them "
        f"under {SHORT_S * 1e6:.0f} us, {sum(k[0] for k in short) * 1e3:.2f} ms together.",
        "",
        "| slowest kernels | ms | MFLOP | buffer sizes (elements) |",
        "| --- | ---: | ---: | --- |",
    ]
    return lines + [f"| {n} | {t * 1e3:.3f} | {f / 1e6:.2f} | {sizes} |" for t, n, f, sizes in found[:count]]


def binding_rows(run: Any, repeats: int = 20) -> list[str]:
    """Milliseconds to check and bind a launch's arrays (CExecutable.bind_buffers), summed over the step's
    launches: the very same arrays again, the arrays of a replay (new arguments, the rest as bound), and
    arrays none of which was bound before (all checked, as every call was before bindings were kept)."""
    cases: dict[str, list[float]] = {"the same arrays": [], "new arguments (a replay)": [], "all new": []}
    for launch, sources in zip(run.replay.launches, run.replay.sources, strict=True):
        bind = launch.compiled.executable.bind_buffers
        bind(launch.buffers)
        arguments = [j for j, source in enumerate(sources) if source.kind == "argument"]
        for case, times in cases.items():
            for _ in range(repeats):
                arrays = list(launch.buffers)
                for j in arguments if case != "the same arrays" else ():
                    arrays[j] = arrays[j].copy()
                if case == "all new":
                    arrays = [a.copy() for a in arrays]
                start = time.perf_counter()
                bind(arrays)
                times.append(time.perf_counter() - start)
            bind(launch.buffers)
    return [f"| {case} | {statistics.median(t) * len(run.replay.launches) * 1e3:.3f} |" for case, t in cases.items()]


def profile_model(model: str, steps: int, kernels: int) -> list[str]:
    run = capture(bench_step.uopc_train_step(model))
    data = bench_step.batches(model, 5 + 2 * steps)

    def step(x: Any, y: Any) -> None:
        run(Tensor(x), Tensor(y)).item()

    for x, y in data[:5]:  # three eager calls, two replays
        step(x, y)
    # the replays to time run the -O3 kernels: while gcc builds them beside the step, the step's threads share
    # the two cores with it, and replays took 30 times longer (112 ms against 2.9 ms, the median of 50)
    realizer.wait_for_optimized_builds()
    times = []
    for x, y in data[5 : 5 + steps]:
        start = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - start)
    profile = cProfile.Profile()
    for x, y in data[5 + steps :]:
        profile.runcall(step, x, y)
    return [
        f"**{model}**: captured step, median {statistics.median(times) * 1e3:.2f} ms, "
        f"min {min(times) * 1e3:.2f} ms over {steps} replays",
        "",
        "| most time of its own (cProfile, per step) | ms |",
        "| --- | ---: |",
        *own_time_rows(profile, steps),
        "",
        "| checking and binding a step's arrays | ms |",
        "| --- | ---: |",
        *binding_rows(run),
        "",
        *kernel_rows(run, kernels),
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    models = ["mlp", "gpt"] if args.model == "both" else [args.model]
    lines = [f"Captured training steps, {stamp.thread_count()} threads.", ""]
    for model in models:
        lines += profile_model(model, args.steps, args.kernels)
    text = "\n".join(lines)
    stamp.emit(text, args.out, MEASURES)


if __name__ == "__main__":
    main()
