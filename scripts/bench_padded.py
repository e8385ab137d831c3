"""Matmuls whose column count fills no last panel of 32: packed with a padded panel, against the plan without
packing (choose_opts's) and numpy.

The MLP's first weight gradient, dy.T @ x with x (128, 784), has 784 = 24 x 32 + 16 columns; packing used to
take whole panels only, and the kernel kept the unpacked plan. Each case is the product C (m x n) = A @ B in
one of training's layouts: A @ B, A @ B.T (B stored (n, k)) and A.T @ B (A stored (k, m), a weight gradient).
Every side runs on one thread (OMP_NUM_THREADS=1, threadpoolctl's limit for numpy) and is timed by this
thread's CPU time (time.thread_time), which time spent descheduled by the machine's other load does not
inflate; the three sides' runs alternate one by one, and the table gives the median and the minimum.

    python scripts/bench_padded.py
    python scripts/bench_padded.py --repeats 400 --out bench_padded.txt
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import stamp
from arguments import output_file, positive_int
from bench_gemm import limit_threads, matmul_graph

from uopc.lower import compile_plan, get_backend, make_plan, normalize

Array = npt.NDArray[Any]
LAYOUTS = ("ab", "abt", "atb")
SHAPES = ((128, 128, 784), (256, 256, 784))  # (m, k, n): the MLP's weight gradient, and twice its rows and k


def sides(m: int, k: int, n: int, layout: str) -> tuple[list[Callable[[], None]], int]:
    """Runners for the packed plan, the unpacked one and numpy, each checked against numpy once; and the
    number of kernels of the packed plan (more than one: it packed)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if layout == "atb" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "abt" else (k, n)).astype(np.float32)
    x, y = (a.T if layout == "atb" else a), (b.T if layout == "abt" else b)
    want = np.empty((m, n), np.float32)
    runners: list[Callable[[], None]] = []
    kernels = 0
    for pack in (get_backend("C").packing(), 0):
        plan = make_plan(normalize([matmul_graph(m, k, n, layout)])[0], pack=pack)
        kernels = kernels or len(plan.kernels)
        executable = compile_plan(plan, get_backend("C")).executable
        buffers = [a.reshape(-1), b.reshape(-1), *(np.zeros(s.size, np.float32) for s in plan.buffers[2:])]
        executable.run(buffers)
        got = buffers[plan.outputs[0]].reshape(m, n)
        if not np.allclose(got, x.astype(np.float64) @ y, rtol=1e-3, atol=1e-3 * np.sqrt(k)):
            raise SystemExit(f"{layout} {m}x{k}x{n} pack={pack}: wrong result")
        runners.append(functools.partial(executable.run, buffers))

    def numpy_run() -> None:
        np.matmul(x, y, out=want)

    return [*runners, numpy_run], kernels


def alternating(runners: list[Callable[[], None]], repeats: int) -> list[list[float]]:
    """Each runner's thread CPU times, `repeats` of each, the runners taking turns one run at a time."""
    for run in runners:
        run()  # untimed: the caches fill
    times: list[list[float]] = [[] for _ in runners]
    for _ in range(repeats):
        for run, runs in zip(runners, times, strict=True):
            start = time.thread_time()
            run()
            runs.append(time.thread_time() - start)
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=positive_int, default=200, help="timed runs of each side (default 200)")
    p.add_argument("--out", type=output_file, help="also write the table (markdown) to this file, stamped")
    args = p.parse_args()
    lines = [
        "| layout | m x k x n | kernels packed | packed: median / min (ms) | unpacked: median / min (ms) "
        "| numpy: median / min (ms) | unpacked / packed (min) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    with limit_threads(1):
        for m, k, n in SHAPES:
            for layout in LAYOUTS:
                runners, kernels = sides(m, k, n, layout)
                times = alternating(runners, args.repeats)
                cells = [f"{statistics.median(t) * 1e3:.3f} / {min(t) * 1e3:.3f}" for t in times]
                ratio = min(times[1]) / min(times[0])
                lines.append(f"| {layout} | {m} x {k} x {n} | {kernels} | {' | '.join(cells)} | {ratio:.2f}x |")
    header = (
        f"One thread, this thread's CPU time, {args.repeats} runs of each side taking turns; packed: the plan "
        "make_plan makes (B's last panel padded), unpacked: the same with pack=0 (choose_opts's plan)."
    )
    measures: list[str | Path] = ["packages/uopc-ir/src", "packages/uopc-lower/src", "packages/uopc-backend-c/src"]
    measures.append(__file__)
    stamp.emit(f"{header}\n\n" + "\n".join(lines) + "\n", args.out, measures)


if __name__ == "__main__":
    main()
