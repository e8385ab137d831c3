"""Benchmark elementwise kernels against the machine's copy bandwidth, measured in the same run.

An elementwise kernel does almost no arithmetic per byte: on arrays larger than the caches its time is the
time to move its bytes through memory, so the yardstick is the fastest copy this machine does. Each op runs
two ways on float32 arrays of each size: the kernel uopc plans for it (compiled as any plan is, run on the
same buffers again and again) and numpy's ufunc into a preallocated output (one thread). In the same
rounds, three C kernels that read one array and write another, each OpenMP thread on one contiguous chunk,
on as many threads as uopc's kernels use: memcpy, x * 2 with ordinary stores, and x * 2 with AVX's
streaming (non-temporal) stores, which write around the cache; the fastest of the three is the copy
bandwidth. GB/s counts the bytes each op must move: read every input once, write the output once (copy 8
bytes an element, add 12, mul-add 16, relu 8). "% of copy" is uopc's GB/s over the copy bandwidth at the
same size.

    python scripts/bench_bandwidth.py                               # 1, 4, 16, 64, 256 MiB
    python scripts/bench_bandwidth.py --sizes 1 16 --rounds 5       # quicker
    python scripts/bench_bandwidth.py --out docs/outputs/bench_bandwidth.txt
"""

from __future__ import annotations

import argparse
import functools
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

# dst = 2 src, each thread on its chunk, with ordinary stores, or with AVX's non-temporal (streaming) stores,
# which write around the cache: the two differ by the line a core reads before it writes (write-allocate)
SCALE_C = """
#include <omp.h>
#ifdef __AVX__
#include <immintrin.h>
#endif
void scale_chunks(float dst[restrict static {n}], const float src[restrict static {n}]) {{
  #pragma omp parallel
  {{
    long t = omp_get_thread_num(), k = omp_get_num_threads();
    long i = {n}L * t / k, hi = {n}L * (t + 1) / k;
#if defined(__AVX__) && {stream}
    for (; i < hi && ((size_t)(dst + i) & 31); i++) dst[i] = src[i] * 2.0f;
    for (; i + 8 <= hi; i += 8)
      _mm256_stream_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), _mm256_set1_ps(2.0f)));
    _mm_sfence();
#endif
    for (; i < hi; i++) dst[i] = src[i] * 2.0f;
  }}
}}
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=positive_int, nargs="+", default=[1, 4, 16, 64, 256], help="MiB per array")
    p.add_argument("--rounds", type=positive_int, default=10, help="timed runs of each case, in turns (best)")
    p.add_argument("--out", type=output_file, help="also write the table to this file, stamped")
    return p.parse_args(argv)


def best_seconds(runs: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """The fastest of `rounds` runs of each, taken in turns (one run of each per round, a pause between
    rounds), so that a burst of other work on the machine slows every side alike instead of one. Each timed
    run follows an untimed one of the same case: its arrays are where its own run left them, not wherever
    the cases before it evicted them to, which at 1 and 4 MiB (arrays the caches can hold) decided more
    than the kernel did (notes 152). The first round's untimed runs touch the outputs' pages first and start
    libgomp's threads."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            run()
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
        time.sleep(PAUSE_S)
    return best


def uopc_runner(op: str, inputs: list[Array]) -> Callable[[], None]:
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
    if buffers[plan.outputs[0]].tobytes() != want.tobytes():
        raise SystemExit(f"{op}: uopc's result differs from numpy's")
    return lambda: compiled.executable.run(buffers)


def c_runner(source: str, name: str, n: int) -> Callable[[], None]:
    """A C kernel of this file (dst, src) on arrays of n floats."""
    program = Program(source, name)
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    return lambda: program(dst, src)


def rows(mib: int, rounds: int, rng: np.random.Generator) -> tuple[list[str], str]:
    """One row per op at `mib` MiB an array, and one of the C kernels, all measured in the same rounds."""
    n = mib * MIB // 4
    inputs = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    outs = {op: np.empty(n, np.float32) for op in OPS}
    runs: dict[str, Callable[[], Any]] = {
        "copy": c_runner(COPY_C.format(n=n), "copy_chunks", n),
        "scale": c_runner(SCALE_C.format(n=n, stream=0), "scale_chunks", n),
        "scale, streaming": c_runner(SCALE_C.format(n=n, stream=1), "scale_chunks", n),
    }
    for op, (reads, _, numpy_op) in OPS.items():
        runs[f"uopc {op}"] = uopc_runner(op, inputs[:reads])
        runs[f"numpy {op}"] = functools.partial(numpy_op, inputs[:reads], outs[op])
    best = best_seconds(runs, rounds)
    memcpy, plain, stream = (2 * n * 4 / best[k] / 1e9 for k in ("copy", "scale", "scale, streaming"))
    copy = max(memcpy, plain, stream)  # the copy bandwidth: the fastest way measured to read n and write n
    lines = []
    for op, (reads, _, _) in OPS.items():
        moved = (reads + 1) * n * 4
        uopc, numpy = moved / best[f"uopc {op}"] / 1e9, moved / best[f"numpy {op}"] / 1e9
        lines.append(f"| {op} | {mib} | {uopc:.1f} | {numpy:.1f} | {copy:.1f} | {uopc / copy:.0%} |")
    return lines, f"| {mib} | {memcpy:.1f} | {plain:.1f} | {stream:.1f} |"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    lines = [
        "| op | MiB per array | uopc GB/s | numpy GB/s | copy GB/s | uopc, % of copy |",
        "| --- |" + " ---: |" * 5,
    ]
    c_lines = [
        "| MiB per array | memcpy per thread | x * 2, ordinary stores | x * 2, streaming stores |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for mib in args.sizes:
        op_lines, c_line = rows(mib, args.rounds, rng)
        lines += op_lines
        c_lines.append(c_line)
    header = (
        f"Elementwise float32 kernels, {stamp.thread_count()} threads for uopc and the C kernels (numpy's ufuncs "
        f"use one); the best of {args.rounds} runs each, taken in turns; GB/s of the bytes each op must read and "
        "write; copy: the fastest of the three C kernels of the second table."
    )
    text = header + "\n\n" + "\n".join(lines) + "\n\nThe copy kernels of the same rounds, in C (GB/s):\n\n"
    text += "\n".join(c_lines) + "\n"
    stamp.emit(text, args.out, [*(f"packages/{p}/src" for p in MEASURES), __file__])


if __name__ == "__main__":
    main()
