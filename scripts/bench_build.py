"""Time how long building a batch of small, distinct kernels takes, with a cold and with a warm cache.

Two ways to build the same kernels: one library holding all of them (as a plan is built: one gcc call), and one
library per kernel (Program: one gcc call each). "Cold" builds into an empty cache folder; "warm" builds
the same kernels again into the folder the cold build filled, so it only renders, hashes and looks up
(in the same process, so the libraries are already loaded too).
Each timing is the median of several runs; each run starts from freshly made Kernel objects, so
linearizing and rendering are counted every time.

    python scripts/bench_build.py                   # 100 kernels, median of 3 runs
    python scripts/bench_build.py --kernels 50 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import stamp
from arguments import output_file, positive_int

from uopc.backend.c import C_BACKEND, Program, render_c
from uopc.backend.c.compiler import cflags, compiler
from uopc.ir import Ops, UOp
from uopc.lower import Kernel, linearize, rangeify


def kernel_asts(count: int) -> list[UOp]:
    """`count` small kernels that differ in their constants and in which reduction and axis they use."""
    asts = []
    for i in range(count):
        x = UOp.buffer(0, 48).reshape((4, 12))
        op = (Ops.ADD, Ops.MAX, Ops.MIN)[i % 3]
        value = (x * float(i + 1) + float(i)).maximum(0.5 * i).reduce(op, [i % 2])
        asts.append(rangeify([(UOp.buffer(1, value.size), value.reshape((value.size,)))]))
    return asts


def fresh_kernels(asts: list[UOp]) -> list[Kernel]:
    return [Kernel(f"k{i}", ast) for i, ast in enumerate(asts)]


def build_batch(asts: list[UOp]) -> None:
    programs = [linearize(k) for k in fresh_kernels(asts)]
    C_BACKEND.runtime.load(C_BACKEND.compiler.compile(C_BACKEND.renderer.render(programs, [])), programs, [])


def build_each(asts: list[UOp]) -> None:
    for k in fresh_kernels(asts):
        Program(render_c(linearize(k)), k.name)


def render_only(asts: list[UOp]) -> None:
    for k in fresh_kernels(asts):
        render_c(linearize(k))


def timed(build: Callable[[list[UOp]], None], asts: list[UOp], cache: Path) -> float:
    os.environ["UOPC_CACHE"] = str(cache)
    start = time.perf_counter()
    build(asts)
    return time.perf_counter() - start


def cold_and_warm(build: Callable[[list[UOp]], None], asts: list[UOp], repeats: int) -> tuple[float, float]:
    """Median cold time (a new empty cache each run) and median warm time (that cache, filled)."""
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="uopc-bench-") as folder:
            cold.append(timed(build, asts, Path(folder)))
            warm.append(timed(build, asts, Path(folder)))
    return statistics.median(cold), statistics.median(warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=positive_int, default=100, help="how many distinct kernels (default 100)")
    parser.add_argument(
        "--repeats", type=positive_int, default=3, help="runs per timing; the median is shown (default 3)"
    )
    parser.add_argument("--out", type=output_file, help="also write the table (markdown) to this file")
    args = parser.parse_args()
    n, repeats = args.kernels, args.repeats
    saved = os.environ.get("UOPC_CACHE")

    asts = kernel_asts(n)
    render = statistics.median(timed(render_only, asts, Path(tempfile.gettempdir())) for _ in range(repeats))
    batch_cold, batch_warm = cold_and_warm(build_batch, asts, repeats)
    each_cold, each_warm = cold_and_warm(build_each, asts, repeats)
    if saved is None:
        os.environ.pop("UOPC_CACHE", None)
    else:
        os.environ["UOPC_CACHE"] = saved

    lines = [
        f"Building {n} small distinct kernels: median of {repeats} runs; CC={compiler()}, CFLAGS={cflags()}",
        "",
        "| how | gcc calls (cold) | cold cache (s) | warm cache (s) | per kernel cold (ms) | per kernel warm (ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| one library for all (one plan) | 1 | {batch_cold:.2f} | {batch_warm:.3f} "
        f"| {batch_cold / n * 1e3:.1f} | {batch_warm / n * 1e3:.2f} |",
        f"| one library per kernel (Program) | {n} | {each_cold:.2f} | {each_warm:.3f} "
        f"| {each_cold / n * 1e3:.1f} | {each_warm / n * 1e3:.2f} |",
        f"| linearize + render only, no build | 0 | {render:.3f} | | {render / n * 1e3:.2f} | |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        measures = [f"packages/{p}/src" for p in ("uopc-ir", "uopc-lower", "uopc-backend-c")]
        stamp.write(args.out, text, [*measures, __file__])


if __name__ == "__main__":
    main()
