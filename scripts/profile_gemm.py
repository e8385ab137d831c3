"""Profile uopc's default matmul plans against the machine's FMA peak: what is left between them and numpy.

For each layout of bench_gemm.py at one size (default 1024), on all threads: the whole plan, each of its
kernels alone (the packing copies and the matmul), and numpy's matmul, each the median of --repeats runs
in each of bench_gemm.py's rounds, each side timed in blocks of its own after pauses (not in turns with
numpy, as bench_gemm.py's table is: read this one for shares, that one for ratios). Beside them, the FMA peak
measured in the same run: a C loop of independent vector multiply-adds on every thread, with no memory
access at all, which no matmul can beat. The matmul kernel's GFLOP/s as a share of that peak says how far
the tile is from the machine; the copies' share of the plan says what packing costs.

    .tools/bin/hatch run python scripts/profile_gemm.py --out docs/outputs/profile_gemm.txt
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path

import bench_gemm
import numpy as np
import stamp
from arguments import output_file, positive_int

from uopc.backend.c import Program
from uopc.lower import compile_plan, get_backend

MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c"]
PEAK_STEPS = 20_000_000  # multiply-add steps per thread: 0.1-0.2 s
PEAK_CHAINS = 12  # independent accumulators: more than FMA units x FMA latency on any x86 core

# vector_size(64): 16 floats, one AVX-512 register (two AVX2 ones); fp-contract lets gcc fuse a * b + c
PEAK_C = """
#include <omp.h>
typedef float f32x16 __attribute__((vector_size(64)));
__attribute__((optimize("fp-contract=fast"))) void fma_peak(float out[restrict static 16]) {{
  #pragma omp parallel
  {{
    f32x16 acc[{chains}], a = (f32x16){{}} + 1.0000001f, b = (f32x16){{}} + 0.9999999f;
    for (int i = 0; i < {chains}; i++) acc[i] = (f32x16){{}} + (float)i;
    for (long n = 0; n < {steps}L; n++) {{
      #pragma GCC unroll {chains}
      for (int i = 0; i < {chains}; i++) acc[i] = acc[i] * a + b;
    }}
    f32x16 sum = (f32x16){{}};
    for (int i = 0; i < {chains}; i++) sum += acc[i];
    #pragma omp critical
    for (int i = 0; i < 16; i++) out[i] += sum[i];
  }}
}}
"""


def peak_gflops(threads: int) -> float:
    """The FMA peak of `threads` threads: the best of three runs of the C loop, in GFLOP/s."""
    program = Program(PEAK_C.format(chains=PEAK_CHAINS, steps=PEAK_STEPS), "fma_peak")
    out = np.zeros(16, np.float32)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        program(out)
        best = min(best, time.perf_counter() - start)
    return threads * PEAK_STEPS * PEAK_CHAINS * 16 * 2 / best / 1e9


def median_ms(run: Callable[[], None], repeats: int) -> float:
    """The median of `repeats` timed runs in each of bench_gemm's rounds, each round after a pause."""
    times, _ = bench_gemm.blocks(run, None, repeats, one_thread=False)
    return times.median * 1e3


def row(what: str, ms: float, plan_ms: float | None, flop: float | None, peak: float) -> str:
    """One row: the time, its share of the plan, and for a matmul its GFLOP/s and share of the peak."""
    share = f"{ms / plan_ms:.0%}" if plan_ms is not None else ""
    rate = f"{flop / ms * 1e3:.1f} | {flop / ms * 1e5 / peak:.0f}%" if flop is not None else " | "
    return f"| {what} | {ms:.2f} | {share} | {rate} |"


def profile(n: int, layout: str, repeats: int, peak: float) -> list[str]:
    """The rows of one layout: the plan, each kernel (a copy named by the operand it packs), and numpy."""
    a, b = bench_gemm.operands(n)
    plan = bench_gemm.plan_for(n, layout, "packed+threads")
    backend = get_backend("C")
    executable = compile_plan(plan, backend).executable
    buffers = [a.reshape(-1), b.reshape(-1), *(backend.runtime.allocate(s.dtype, s.size) for s in plan.buffers[2:])]
    flop = 2 * n**3 / 1e9
    name = next(k for k, v in bench_gemm.LAYOUTS.items() if v == layout)
    plan_ms = median_ms(lambda: executable.run(buffers), repeats)
    rows = [row(f"{name}: whole plan", plan_ms, plan_ms, flop, peak)]
    for step in plan.steps:
        arrays = [buffers[i] for i in step.buffers]
        ms = median_ms(functools.partial(executable.run_kernel, step.kernel, arrays), repeats)
        matmul = step is plan.steps[-1]
        what = "matmul" if matmul else f"copy of {'B' if 1 in step.buffers else 'A'}"
        rows.append(row(f"{name}: {what}", ms, plan_ms, flop if matmul else None, peak))
    run_numpy, _ = bench_gemm.numpy_runner(a, b, layout)
    rows.append(row(f"{name}: numpy", median_ms(run_numpy, repeats), None, flop, peak))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=positive_int, default=1024, help="n of the n x n x n matmuls (default 1024)")
    p.add_argument("--repeats", type=positive_int, default=10, help="timed runs per block (default 10)")
    p.add_argument("--out", type=output_file, help="also write the table (markdown) to this file, stamped")
    args = p.parse_args()
    threads = stamp.thread_count()
    with bench_gemm.limit_threads(threads):
        peak = peak_gflops(threads)
        rows = [r for layout in bench_gemm.LAYOUTS.values() for r in profile(args.size, layout, args.repeats, peak)]
    header = (
        f"uopc's default matmul plans at n = {args.size}, {threads} threads, and numpy's matmul (OpenBLAS, "
        f"{bench_gemm.blas_kernel()}): medians of {bench_gemm.ROUNDS} blocks of {args.repeats} runs after "
        f"pauses. FMA peak of the same run: {peak:.1f} GFLOP/s ({PEAK_CHAINS} independent 16-float "
        "multiply-adds per step on every thread, no memory access)."
    )
    lines = ["| layout: what | median (ms) | share of the plan | GFLOP/s | % of FMA peak |"]
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    # bench_gemm.py: its timing (blocks) is this script's
    measures: list[str | Path] = [*(f"packages/{m}/src" for m in MEASURES), __file__, "scripts/bench_gemm.py"]
    stamp.emit(f"{header}\n\n" + "\n".join(lines + rows) + "\n", args.out, measures)


if __name__ == "__main__":
    main()
