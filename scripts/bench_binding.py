"""Measure where uopc's OpenMP threads run: the placement uopc.backend.c.openmp sets up against OpenMP's own.

"bound" is uopc's default: libgomp's worker threads bound one to a core, and the thread that calls a plan
moved to the master's core for the call. "unbound" is the same process with OMP_PROC_BIND=false, which
uopc leaves as the user set it: every thread goes where the scheduler puts it. Each policy runs on a quiet
machine, beside a busy loop (a process spinning for the whole cell, as another user's job would) free to
move, and beside the same loop pinned to the last CPU, where a bound worker thread runs and cannot leave:
the case binding risks most. The cells take turns, over --rounds rounds.

Each cell is three fresh processes. The matmuls: the three layouts of bench_gemm.py at 512, its default
plans, timed in blocks of --repeats runs after pauses, as bench_gemm.py times them (no numpy in the
process). The training steps: bench_step.py's captured MLP and GPT steps (a child each, empty kernel cache,
median of --steps steps). The table gives each cell's medians (ms), one per round.

    .tools/bin/hatch run python scripts/bench_binding.py --out docs/outputs/bench_binding.txt
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import unittest.mock
from collections.abc import Iterator
from pathlib import Path

import stamp
from arguments import output_file, positive_int

MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c", "uopc-tensor"]
SIZE = 512
POLICIES = {"bound": {}, "unbound": {"OMP_PROC_BIND": "false"}}
CONDITIONS = ("quiet", "busy", "pinned")  # pinned: the busy loop confined to the last CPU
COLUMNS = ["A @ B", "A @ B.T", "A.T @ B", "MLP step", "GPT step"]


def matmul_medians(repeats: int) -> dict[str, float]:
    """In the child: the median ms of each layout's default plan at SIZE, on all threads, in blocks."""
    import bench_gemm

    medians = {}
    for name, layout in bench_gemm.LAYOUTS.items():
        a, b = bench_gemm.operands(SIZE)
        run, _ = bench_gemm.uopc_runner(bench_gemm.plan_for(SIZE, layout, "packed+threads"), a, b, layout)
        times, _ = bench_gemm.blocks(run, None, repeats, one_thread=False)
        medians[name] = times.median * 1e3
    return medians


def step_medians(steps: int, threads: int) -> dict[str, float]:
    """The captured steps' medians (ms), each in a child of bench_step.py with an empty kernel cache."""
    import bench_step

    args = argparse.Namespace(steps=steps, warmup=3)
    medians = {}
    for model, column in (("mlp", "MLP step"), ("gpt", "GPT step")):
        result = bench_step.measure(model, "uopc captured", args, threads)
        assert result is not None, "uopc's rows need no PyTorch"
        medians[column] = result["median_ms"]
    return medians


@contextlib.contextmanager
def busy_core(condition: str) -> Iterator[None]:
    """A process that spins for as long as the cell runs, unless the machine is to be quiet; where "pinned",
    confined to the last CPU this process may use."""
    cpus = {max(os.sched_getaffinity(0))} if condition == "pinned" else os.sched_getaffinity(0)
    loop = f"import os\nos.sched_setaffinity(0, {cpus})\nwhile True: pass"
    spinner = subprocess.Popen([sys.executable, "-c", loop]) if condition != "quiet" else None
    try:
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def cell(policy: dict[str, str], condition: str, args: argparse.Namespace, threads: int) -> dict[str, float]:
    """One cell's medians: the matmuls in a child process under `policy`, then the steps under it."""
    from uopc.backend.c import openmp

    with unittest.mock.patch.dict(os.environ):
        for name in openmp.USER_PLACEMENT:  # the user's own placement, if any
            os.environ.pop(name, None)
        os.environ.update({**policy, "OMP_NUM_THREADS": str(threads)})
        with busy_core(condition):
            command = [sys.executable, __file__, "--child", "--repeats", str(args.repeats)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"the matmuls' child failed:\n{done.stderr[-3000:]}")
            medians: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
            medians.update(step_medians(args.steps, threads))
    return medians


def table(results: dict[tuple[str, str], list[dict[str, float]]]) -> str:
    lines = ["| machine, threads | " + " | ".join(f"{c}, median (ms)" for c in COLUMNS) + " |"]
    lines.append("| --- |" + " ---: |" * len(COLUMNS))
    for (condition, policy), rounds in results.items():
        values = [" / ".join(f"{r[c]:.2f}" for r in rounds) for c in COLUMNS]
        lines.append(f"| {condition}, {policy} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=positive_int, default=2, help="times each cell is measured (default 2)")
    p.add_argument("--repeats", type=positive_int, default=10, help="matmul runs per block (default 10)")
    p.add_argument("--steps", type=positive_int, default=50, help="timed steps per training step (default 50)")
    p.add_argument("--out", type=output_file, help="also write the table (markdown) to this file, stamped")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(matmul_medians(args.repeats)))
        return
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("bench_binding.py compares placements of two threads or more: this process has one core")
    threads = stamp.thread_count()
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for condition in CONDITIONS:
            for name, policy in POLICIES.items():
                medians = cell(policy, condition, args, threads)
                results.setdefault((condition, name), []).append(medians)
                print(condition, name, {k: round(v, 2) for k, v in medians.items()}, flush=True)
    header = (
        f"Where OpenMP's threads run, {threads} threads: each cell's medians, one per round ({args.rounds} "
        f"rounds, the cells taking turns). Matmuls: n = {SIZE}, the default plan, blocks of {args.repeats} "
        f"runs after pauses; steps: captured, median of {args.steps}, empty kernel cache. Busy: a process "
        "spinning for the whole cell, free to move; pinned: the same, confined to the last CPU."
    )
    # bench_gemm.py: its timing (blocks) is this script's
    measures: list[str | Path] = [*(f"packages/{m}/src" for m in MEASURES), __file__, "scripts/bench_gemm.py"]
    stamp.emit(f"{header}\n\n{table(results)}\n", args.out, measures)


if __name__ == "__main__":
    main()
