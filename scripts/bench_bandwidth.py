"""Benchmark elementwise kernels against the machine's copy bandwidth, measured in the same run.

An elementwise kernel does almost no arithmetic per byte: on arrays larger than the caches its time is the
time to move its bytes through memory, so the yardstick is the fastest copy this machine does. Each op runs
three ways on float32 arrays of each size: the kernel uopc plans for it (compiled as any plan is, run on
the same buffers again and again), numpy's ufunc into a preallocated output (one thread), and, as the
yardstick, a copy written in C that gives each OpenMP thread one contiguous chunk to memcpy, on as many
threads as uopc's kernels use. GB/s counts the bytes each op must move: read every input once, write the
output once (copy 8 bytes an element, add 12, mul-add 16, relu 8). "% of copy" is uopc's GB/s over the
copy kernel's at the same size.

    python scripts/bench_bandwidth.py                               # 1, 4, 16, 64, 256 MiB
    python scripts/bench_bandwidth.py --sizes 1 16 --repeats 5      # quicker
    python scripts/bench_bandwidth.py --out docs/outputs/bench_bandwidth.txt
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import stamp
from arguments import output_file, positive_int

from uopc.backend.c import Program
from uopc.ir import Ops, UOp
from uopc.lower import compile_plan, get_backend, make_plan, normalize

Array = npt.NDArray[Any]
MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c"]
MIB = 1 << 20
PAUSE_S = 0.2  # lets one side's spinning thread pool go to sleep before the other side runs


OPS: dict[str, tuple[int, Callable[[list[UOp]], UOp], Callable[[list[Array], Array], Any]]] = {
    # name: (arrays read, the graph over the input buffers, numpy writing into `out`)
    "copy": (1, lambda xs: UOp(Ops.CONTIGUOUS, xs[0].dtype, (xs[0],)), lambda xs, out: np.copyto(out, xs[0])),
    "add": (2, lambda xs: xs[0] + xs[1], lambda xs, out: np.add(xs[0], xs[1], out=out)),
    "mul-add": (
        3,
        lambda xs: xs[0] * xs[1] + xs[2],
        lambda xs, out: np.add(np.multiply(xs[0], xs[1], out=out), xs[2], out=out),
    ),
    "relu": (1, lambda xs: (xs[0] <= 0.0).where(0.0, xs[0]), lambda xs, out: np.maximum(xs[0], 0.0, out=out)),
}  # relu as the Tensor library writes it (NaN kept)

COPY_C = """
#include <string.h>
#include <omp.h>
void copy_chunks(float dst[restrict static {n}], const float src[restrict static {n}]) {{
  #pragma omp parallel
  {{
    long t = omp_get_thread_num(), k = omp_get_num_threads();
    long lo = {n}L * t / k, hi = {n}L * (t + 1) / k;
    memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
  }}
}}
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=positive_int, nargs="+", default=[1, 4, 16, 64, 256], help="MiB per array")
    p.add_argument("--repeats", type=positive_int, default=10, help="timed runs per case (median)")
    p.add_argument("--out", type=output_file, help="also write the table to this file, stamped")
    return p.parse_args(argv)


def median_seconds(run: Callable[[], Any], repeats: int) -> float:
    run()  # first touch of the output's pages, and libgomp's threads started
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    time.sleep(PAUSE_S)
    return statistics.median(times)


def uopc_runner(op: str, inputs: list[Array]) -> tuple[Callable[[], None], Array]:
    """The plan uopc makes for the op over input buffers, compiled, run once and checked against numpy."""
    reads, graph_of, numpy_op = OPS[op]
    n = inputs[0].size
    graph, _ = normalize([graph_of([UOp.buffer(i, n) for i in range(reads)])])
    plan = make_plan(graph)
    compiled = compile_plan(plan, get_backend("C"))
    buffers = [*inputs, *(np.empty(s.size, np.float32) for s in plan.buffers[plan.n_inputs :])]
    compiled.executable.run(buffers)
    want = np.empty(n, np.float32)
    numpy_op(inputs, want)
    got = buffers[plan.outputs[0]]
    if got.tobytes() != want.tobytes():
        raise SystemExit(f"{op}: uopc's result differs from numpy's")
    return (lambda: compiled.executable.run(buffers)), got


def row(op: str, mib: int, copy_gbs: float, repeats: int, rng: np.random.Generator) -> str:
    reads = OPS[op][0]
    n = mib * MIB // 4
    inputs = [rng.standard_normal(n, dtype=np.float32) for _ in range(reads)]
    moved = (reads + 1) * n * 4
    run, _ = uopc_runner(op, inputs)
    uopc = moved / median_seconds(run, repeats) / 1e9
    out = np.empty(n, np.float32)
    numpy = moved / median_seconds(lambda: OPS[op][2](inputs, out), repeats) / 1e9
    return f"| {op} | {mib} | {uopc:.1f} | {numpy:.1f} | {copy_gbs:.1f} | {uopc / copy_gbs:.0%} |"


def copy_bandwidth(mib: int, repeats: int) -> float:
    """GB/s of the C copy kernel (one memcpy per thread) on arrays of `mib` MiB."""
    n = mib * MIB // 4
    program = Program(COPY_C.format(n=n), "copy_chunks")
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    return 2 * n * 4 / median_seconds(lambda: program(dst, src), repeats) / 1e9


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    lines = [
        "| op | MiB per array | uopc GB/s | numpy GB/s | C copy GB/s | uopc, % of copy |",
        "| --- |" + " ---: |" * 5,
    ]
    for mib in args.sizes:
        copy_gbs = copy_bandwidth(mib, args.repeats)
        lines += [row(op, mib, copy_gbs, args.repeats, rng) for op in OPS]
    header = (
        f"Elementwise float32 kernels, {stamp.thread_count()} threads for uopc and the C copy (numpy's ufuncs use "
        f"one); median of {args.repeats} runs each, GB/s of the bytes each op must read and write."
    )
    text = header + "\n\n" + "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        stamp.write(args.out, text, [*(f"packages/{p}/src" for p in MEASURES), __file__])


if __name__ == "__main__":
    main()
