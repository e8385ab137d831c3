"""Measure where threads start to pay: the threshold behind uopc.lower.opt.THREAD_MIN_WORK.

A threaded kernel pays OpenMP's fork and join, and, where the other threads have gone to sleep since the
last parallel loop, their wake-up; for a kernel of a few microseconds that costs more than the work. This
script threads every kernel of the two training steps of scripts/bench_step.py that choose_opts can thread
(THREAD_MIN_WORK set to 1, in this process only), and times each one on one thread and on all of them
(libgomp's omp_set_num_threads, before each call), alternating, on the buffers of a captured step: back to
back (the other threads still spinning from the call before) and after a pause long enough for them to
sleep (a step's threaded kernels often follow a few unthreaded ones). A packed matmul's opts come from
pack.py, not from the threshold, so its kernels are left out.

For the kernels it prints the work (the kernel's loop iterations, as choose_opts counts them) from which
threading makes their total time smallest, each kernel's time on all threads taken as the mean of the two
cases.

Kernels alone say what a thread costs; a step says what the threshold is worth, since between two threaded
kernels the other threads spin or sleep depending on what runs in between. So the script then runs both
captured steps (scripts/bench_step.py's child: steady median after warm-up) with each candidate threshold,
every run in a fresh process with an empty kernel cache, the candidates taking turns over --rounds rounds
(so that other load on a shared machine falls on all of them alike), and names the candidate whose two steps
take least time together (the sum of each step's median, relative to that step's best candidate).

    .tools/bin/hatch run python scripts/thread_policy.py --out docs/outputs/thread_policy.txt
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import stamp
from arguments import output_file, positive_int

MEASURES: list[str | Path] = [
    *(f"packages/uopc-{p}/src" for p in ("lower", "backend-c", "tensor")),
    "scripts/gpt.py",
    __file__,
]
NONE = 1 << 62  # a threshold no kernel reaches: nothing choose_opts opts is threaded
CANDIDATES = [1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, NONE]
PAUSE_S = 2e-3  # longer than GOMP_SPINCOUNT's spin (openmp.py): the other threads sleep when the kernel starts


@dataclass(frozen=True)
class Timed:
    name: str
    work: int  # loop iterations of the kernel before opts: choose_opts's measure
    mflop: float
    kib: float  # bytes of the buffers it reads and writes
    one: float  # seconds on one thread
    hot: float  # on all threads, called right after the previous call
    woken: float  # on all threads, after a pause

    @property
    def threaded(self) -> float:
        return (self.hot + self.woken) / 2


def thresholds(text: str) -> list[int]:
    """Candidate thresholds as powers of two, `12,16,none`: 2^12, 2^16, and one no kernel reaches."""
    found = []
    for word in text.split(","):
        if word == "none":
            found.append(NONE)
        elif word.isdigit() and int(word) < 62:
            found.append(1 << int(word))
        else:
            raise argparse.ArgumentTypeError(f"{word!r} is not an exponent of two from 0 to 61, nor none")
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=positive_int, default=15, help="timed calls of each kind per kernel (15)")
    p.add_argument("--rounds", type=positive_int, default=2, help="turns of the candidate thresholds (2)")
    p.add_argument("--steps", type=positive_int, default=50, help="timed steps of each run (50)")
    p.add_argument(
        "--thresholds",
        type=thresholds,
        default=CANDIDATES,
        help="the candidates for the steps, as powers of two or none (default 12,14,16,18,20,none)",
    )
    p.add_argument("--kernels", action=argparse.BooleanOptionalAction, default=True, help="measure the kernels too")
    p.add_argument("--out", type=output_file, help="also write the tables to this file, stamped")
    p.add_argument("--child", nargs=2, metavar=("MODEL", "WORK"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def captured_launches(model: str) -> list[Any]:
    """The launches of `model`'s training step, captured, after its optimized builds are in."""
    import bench_step

    from uopc.tensor import Tensor, capture
    from uopc.tensor.realize import realizer

    step = capture(bench_step.uopc_train_step(model))
    batches = bench_step.batches(model, 5)
    for x, y in batches[:4]:
        step(Tensor(x), Tensor(y)).item()
    realizer.wait_for_optimized_builds()
    step(*(Tensor(a) for a in batches[4])).item()  # a run swaps the optimized libraries in
    assert step.replay is not None, "four calls replay"
    return step.replay.launches


def time_call(fn: Any, pointers: list[int], team: int, pause: bool, gomp: Any) -> float:
    """Seconds of one call on `team` threads: right after a call before it (its threads still spinning), or
    after a pause (asleep)."""
    gomp.omp_set_num_threads(team)
    fn(*pointers)
    if pause:
        time.sleep(PAUSE_S)
    start = time.perf_counter()
    fn(*pointers)
    return time.perf_counter() - start


def measure(model: str, repeats: int, gomp: Any) -> list[Timed]:
    """Each kernel of `model`'s step that choose_opts threads, the fastest of `repeats` calls of each kind. The
    kernels take turns, one call of each kind per round, so that a few busy milliseconds on a shared machine
    delay one call of each kernel, not every call of one."""
    from uopc.backend.c import openmp
    from uopc.ir import Ops
    from uopc.lower import choose_opts

    kernels = []
    for launch in captured_launches(model):
        executable, programs = launch.compiled.executable, launch.compiled.programs
        for s in launch.plan.steps:
            kernel = launch.plan.kernels[s.kernel]
            if kernel.opts.thread is None or kernel.opts != choose_opts(kernel.ast):
                continue  # nothing to thread, or a packed matmul's opts
            ranges = {u.arg.axis: u.src[0].arg for u in kernel.ast.toposort() if u.op is Ops.RANGE}
            arrays = [launch.buffers[b] for b in s.buffers]
            fn, pointers = executable.functions[s.kernel], [a.ctypes.data for a in arrays]
            facts = (kernel.name, prod(ranges.values()), programs[s.kernel].flops / 1e6, sum(a.nbytes for a in arrays))
            kernels.append((facts, fn, pointers))
    team = stamp.thread_count()
    times: list[list[list[float]]] = [[[], [], []] for _ in kernels]

    def time_all() -> None:
        for _ in range(repeats):
            for (_, fn, pointers), kinds in zip(kernels, times, strict=True):
                for out, n, pause in zip(kinds, (1, team, team), (False, False, True), strict=True):
                    out.append(time_call(fn, pointers, n, pause, gomp))

    openmp.on_master_core(time_all)  # from the core a plan's run makes its calls from, as runs are
    gomp.omp_set_num_threads(team)
    return [
        Timed(name, work, mflop, nbytes / 1024, *(min(t) for t in kinds))
        for ((name, work, mflop, nbytes), _, _), kinds in zip(kernels, times, strict=True)
    ]


MEASURES_OF_WORK: dict[str, Callable[[Timed], float]] = {
    "iterations": lambda t: t.work,
    "KiB": lambda t: t.kib,
    "MFLOP": lambda t: t.mflop,
}


def best_threshold(found: list[Timed], measure: Callable[[Timed], float]) -> tuple[float, float]:
    """The value of `measure` from which threading makes the kernels' total smallest, and that total (s)."""
    candidates = [*sorted({measure(t) for t in found}), math.inf]
    totals = [(sum(t.threaded if measure(t) >= w else t.one for t in found), w) for w in candidates]
    total, value = min(totals)
    return value, total


def report(found: list[Timed], shipped: int) -> str:
    """The table, and the totals: one thread, all threaded, threaded from `shipped` (choose_opts's threshold) on,
    and from the best threshold on each measure of work."""
    rows = [
        f"{len(found)} kernels choose_opts can thread, from the MLP and GPT steps, {stamp.thread_count()} threads; "
        "the fastest of each kind of call, in microseconds.",
        "",
        "| kernel | work (iterations) | MFLOP | KiB | 1 thread | all, back to back | all, after a pause |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in sorted(found, key=lambda t: t.work):
        times = f"{t.one * 1e6:.1f} | {t.hot * 1e6:.1f} | {t.woken * 1e6:.1f}"
        rows.append(f"| {t.name} | {t.work} | {t.mflop:.2f} | {t.kib:.0f} | {times} |")
    totals = [
        ("one thread", "", sum(t.one for t in found)),
        ("all threaded", "", sum(t.threaded for t in found)),
        ("THREAD_MIN_WORK", f"{shipped}", sum(t.threaded if t.work >= shipped else t.one for t in found)),
    ]
    for name, measure in MEASURES_OF_WORK.items():
        value, total = best_threshold(found, measure)
        totals.append((f"best by {name}", f"{value:g}", total))
    rows += [
        "",
        "The kernels' total, each on one thread or threaded (the mean of the two kinds of call) from a threshold on:",
        "",
        "| kernels run | threaded from | total (ms) |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {start} | {total * 1e3:.2f} |" for name, start, total in totals),
    ]
    return "\n".join(rows)


MODELS = ("mlp", "gpt")


def step_times(model: str, work: int, steps: int) -> dict[str, float]:
    """A child's work: `model`'s captured step with the threshold `work`, bench_step's steady times."""
    import bench_step

    from uopc.lower import opt

    opt.THREAD_MIN_WORK = work
    result: dict[str, float] = bench_step.child(model, "uopc captured", steps, 3, stamp.thread_count())
    return result


def run_steps(candidates: list[int], rounds: int, steps: int) -> dict[tuple[str, int], list[dict[str, float]]]:
    """Each candidate's steps, each in a fresh process with an empty kernel cache, the candidates in turn."""
    found: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(rounds):
        for work in candidates:
            for model in MODELS:
                command = [sys.executable, __file__, "--child", model, str(work), "--steps", str(steps)]
                with tempfile.TemporaryDirectory(prefix="uopc-thread-policy-") as cache:
                    env = {**os.environ, "UOPC_CACHE": cache, "OMP_NUM_THREADS": str(stamp.thread_count())}
                    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{model} with threshold {work} failed:\n{done.stderr[-3000:]}")
                found.setdefault((model, work), []).append(json.loads(done.stdout.strip().splitlines()[-1]))
    return found


def step_report(found: dict[tuple[str, int], list[dict[str, float]]], candidates: list[int]) -> str:
    """A row per candidate: each step's median (of the rounds' medians) and min, and the score: the sum over
    the steps of its median relative to the step's best candidate. The smallest score wins."""
    median = {k: statistics.median(r["median_ms"] for r in runs) for k, runs in found.items()}
    best = {m: min(median[m, w] for w in candidates) for m in MODELS}
    score = {w: sum(median[m, w] / best[m] for m in MODELS) for w in candidates}
    rows = [
        "| threshold (iterations) | MLP median (ms) | MLP min (ms) | GPT median (ms) | GPT min (ms) | score |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for w in candidates:
        cells = [f"{median[m, w]:.2f} | {min(r['min_ms'] for r in found[m, w]):.2f}" for m in MODELS]
        rows.append(f"| {_work(w)} | {' | '.join(cells)} | {score[w]:.3f} |")
    winner = min(candidates, key=score.__getitem__)
    return "\n".join([*rows, "", f"Measured threshold: {_work(winner)} (the smallest score)."])


def _work(w: int) -> str:
    return "none threaded" if w == NONE else f"2^{w.bit_length() - 1}"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sys.path.append(os.path.dirname(__file__))
    if args.child:
        print(json.dumps(step_times(args.child[0], int(args.child[1]), args.steps)))
        return
    parts = [kernel_part(args.repeats)] if args.kernels else []
    steps = step_report(run_steps(args.thresholds, args.rounds, args.steps), args.thresholds)
    parts.append(f"Captured steps, {args.rounds} rounds of {args.steps} steps:\n\n{steps}")
    print(steps)
    if args.out:
        stamp.write(args.out, "\n\n".join(parts) + "\n", MEASURES)
        print(f"wrote {args.out}")


def kernel_part(repeats: int) -> str:
    """The kernels' table, measured in this process with every kernel that can be threaded threaded."""
    os.environ["UOPC_CACHE"] = tempfile.mkdtemp(prefix="uopc-thread-policy-")  # no plan or opts kept from before
    from uopc.lower import opt

    # every kernel with an output axis to share is threaded, to be measured both ways
    shipped, opt.THREAD_MIN_WORK = opt.THREAD_MIN_WORK, 1
    from uopc.backend.c import start_openmp

    gomp = start_openmp()  # as the first kernel library starts it: the workers bound to cores
    text = report([t for model in MODELS for t in measure(model, repeats, gomp)], shipped)
    print(text, flush=True)
    return text


if __name__ == "__main__":
    main()
