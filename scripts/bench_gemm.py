"""Benchmark a float32 matmul built as a uopc graph, under several Opts, beside numpy's matmul.

The matmul is the graph the book builds by hand: A reshaped to (n, 1, n) and B transposed to (1, n, n),
both expanded to (n, n, n), multiplied, and summed over the last axis. Each Opts setting is lowered,
compiled once, run once as a warm-up (and checked against numpy), then timed; the table reports the
median time and GFLOP/s (2 n^3 floating-point operations per matmul).

    python scripts/bench_gemm.py                    # 1024 x 1024, 5 timed runs per setting
    python scripts/bench_gemm.py --size 512 --repeats 9 --out docs/outputs/bench_gemm.txt
    python scripts/bench_gemm.py --layout abt       # A @ B.T: B stored as a Linear layer stores its weight
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import stamp
from arguments import output_file, positive_int

from uopc.backend.c import Program, render_c
from uopc.backend.c.compiler import cflags, compiler
from uopc.ir import UOp
from uopc.lower import Kernel, LowerError, Opts, linearize, rangeify

Array = npt.NDArray[Any]
MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c"]  # the packages whose code these numbers time

# From plain loops to a register tile (upcast) of 16 or 64 outputs, which uses each loaded value 4 or 8
# times, an unrolled reduce loop, and threads over rows. Upcast 8x8 with threads was the fastest setting found on a
# 2-core machine (4x16, 8x16, 4x32 and 16x16 tiles were slower; 16x16 takes gcc minutes to compile).
SETTINGS: dict[str, Opts] = {
    "none": Opts(),
    "upcast 4x4": Opts(upcast={0: 4, 1: 4}),
    "upcast 4x4 + unroll 4": Opts(upcast={0: 4, 1: 4}, unroll={2: 4}),
    "upcast 4x4 + thread": Opts(upcast={0: 4, 1: 4}, thread=0),
    "upcast 8x8": Opts(upcast={0: 8, 1: 8}),
    "upcast 8x8 + thread": Opts(upcast={0: 8, 1: 8}, thread=0),
}


def matmul_graph(n: int, layout: str = "ab") -> UOp:
    """C = A @ B for row-major n x n A (slot 0) and B (slot 1): reshape, expand, multiply, sum.

    Layout "ab" reads B across its rows, a stride of n along the reduce axis; "abt" computes A @ B.T, which
    reads both operands along their rows (contiguous), as a Linear layer reads its weight."""
    a = UOp.buffer(0, n * n).reshape((n, 1, n)).expand((n, n, n))
    b = UOp.buffer(1, n * n).reshape((n, n))
    b = b.permute((1, 0)) if layout == "ab" else b
    return (a * b.reshape((1, n, n)).expand((n, n, n))).sum([2]).reshape((n, n))


@dataclass
class Row:
    name: str
    build_s: float | None  # lowering, rendering and compiling; None for numpy
    median_s: float | None  # None when the setting does not apply to this size
    note: str = ""


def median_time(run: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_setting(name: str, opts: Opts, n: int, a: Array, b: Array, want: Array, repeats: int, layout: str) -> Row:
    start = time.perf_counter()
    try:
        linear = linearize(Kernel("matmul", rangeify([(UOp.buffer(2, n * n), matmul_graph(n, layout))]), opts))
    except LowerError as e:  # a factor that does not divide this size
        return Row(name, None, None, str(e))
    program = Program(render_c(linear), linear.name)
    build = time.perf_counter() - start
    out = np.zeros(n * n, np.float32)
    program(a, b, out)  # warm-up: page faults, thread pool start, caches
    if not np.allclose(out.reshape(n, n), want, rtol=1e-3, atol=1e-3 * np.sqrt(n)):
        raise SystemExit(f"{name}: wrong result, max error {np.abs(out.reshape(n, n) - want).max()}")
    return Row(name, build, median_time(lambda: program(a, b, out), repeats))


def bench_numpy(a: Array, b: Array, repeats: int) -> Row:
    out = np.empty((a.shape[0], b.shape[1]), np.float32)  # preallocated, as uopc's output is

    def run() -> None:
        np.matmul(a, b, out=out)

    run()  # warm-up
    return Row("numpy matmul", None, median_time(run, repeats))


def table(rows: list[Row], n: int) -> str:
    flops = 2 * n**3
    best_numpy = next(r.median_s for r in rows if r.name == "numpy matmul")
    lines = [
        "| setting | build (s) | median (ms) | GFLOP/s | vs numpy |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r.median_s is None:
            lines.append(f"| {r.name} | | | | n/a: {r.note} |")
            continue
        build = "" if r.build_s is None else f"{r.build_s:.2f}"
        ratio = "" if best_numpy is None else f"{best_numpy / r.median_s:.2f}x"
        gflops = flops / r.median_s / 1e9
        lines.append(f"| {r.name} | {build} | {r.median_s * 1e3:.1f} | {gflops:.1f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=positive_int, default=1024, help="n for an n x n x n matmul (default 1024)")
    parser.add_argument(
        "--repeats", type=positive_int, default=5, help="timed runs per setting, after a warm-up (default 5)"
    )
    parser.add_argument("--out", type=output_file, help="also write the table (markdown) to this file")
    parser.add_argument("--layout", choices=["ab", "abt"], default="ab", help="A @ B (default) or A @ B.T")
    args = parser.parse_args()
    n, repeats = args.size, args.repeats

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    want = a @ b if args.layout == "ab" else a @ b.T
    rows = [
        bench_setting(name, opts, n, a.reshape(-1), b.reshape(-1), want, repeats, args.layout)
        for name, opts in SETTINGS.items()
    ]
    rows.append(bench_numpy(a, b if args.layout == "ab" else b.T, repeats))

    product = "A @ B" if args.layout == "ab" else "A @ B.T"
    header = (
        f"float32 matmul {product}, n = {n}: median of {repeats} runs after a warm-up; "
        f"{os.cpu_count()} CPUs ({platform.machine()}), CC={compiler()}, CFLAGS={cflags()}, numpy {np.__version__}"
    )
    text = f"{header}\n\n{table(rows, n)}\n"
    print(text)
    if args.out is not None:
        stamp.write(args.out, text, [*(f"packages/{p}/src" for p in MEASURES), __file__])


if __name__ == "__main__":
    main()
