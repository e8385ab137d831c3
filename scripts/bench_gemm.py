"""Benchmark float32 matmuls planned by uopc beside numpy's (and PyTorch's, where it is installed).

Two parts, one table. The ladder: A @ B at one size (default 1024) under each step from plain loops to the
kernel uopc plans by default (naive loops, 16 columns at once in vector lanes, a scalar register tile, a
tile of vectors, B packed into panels, threads), each lowered, compiled, checked against numpy and timed. Then
the three layouts of training, A @ B (x @ W), A @ B.T (x @ W.T, a Linear layer's forward) and A.T @ B
(x.T @ dy, its weight gradient), at 256, 512, 1024 and 2048, each with the plan make_plan picks by default,
and the same plan with its kernels' opts searched (BEAM, search.py in uopc-lower): the searched plan's speed,
and the seconds the search took (0 where the kernel cache held the choices already; run with UOPC_CACHE set
to an empty folder to time the searches).

Two thread pools that spin after their work (libgomp's for uopc, OpenBLAS's for numpy) starve each other on a
small machine, so each case times its sides apart: ROUNDS rounds of a pause and a block of uopc runs, then
a pause and a block of numpy runs; medians are over all the rounds' runs. PyTorch's column is timed in a
process of its own, before the rest, its runs back to back: PyTorch brings a libgomp.so.1 of its own, and
in a process that has loaded it uopc's kernels run on it, under the settings it read as it loaded, not
uopc's (notes 161). Run the script from the torch environment (`hatch -e torch run ...`) to fill that
column.

On a busy machine wall-clock times of two threads measure the other load as much as the kernels. With
`--threads 1` every side runs on one thread (OMP_NUM_THREADS=1 for uopc, threadpoolctl's limit for numpy,
entered once around the whole run, as it costs about 0.2 ms each time; torch.set_num_threads(1)) and the clock
is the calling thread's CPU time (time.thread_time), which time spent descheduled does not inflate. There is no
spinning pool to keep apart, so the runs of both sides alternate one by one, and the table gives the minimum
beside the median: the best a kernel did when nothing evicted its caches.

    python scripts/bench_gemm.py                                  # everything, 5 runs a block
    python scripts/bench_gemm.py --sizes 512 --ladder-size 512    # quicker
    python scripts/bench_gemm.py --out docs/outputs/bench_gemm.txt
    python scripts/bench_gemm.py --no-ladder --sizes 64 128 256 --compare-unpacked   # where packing pays
    python scripts/bench_gemm.py --beam 0                          # no searched column
    python scripts/bench_gemm.py --threads 1 --repeats 10          # one thread, CPU time: for a busy machine
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import stamp
from arguments import non_negative_int, output_file, positive_int

from uopc.backend.c.compiler import cflags, compiler
from uopc.ir import UOp
from uopc.lower import Kernel, Opts, Plan, compile_plan, get_backend, make_plan, normalize

Array = npt.NDArray[Any]
MEASURES = ["uopc-ir", "uopc-lower", "uopc-backend-c"]  # the packages whose code these numbers time
ROUNDS = 3
PAUSE_S = 0.3  # long enough for a spinning pool to go to sleep (GOMP_SPINCOUNT, OPENBLAS_THREAD_TIMEOUT)

HEADER = (
    "| case | median (ms) | min (ms) | GFLOP/s | numpy GFLOP/s | torch GFLOP/s | vs numpy | vs numpy (min) "
    "| searched GFLOP/s | search (s) |"
)
LAYOUTS = {"A @ B": "ab", "A @ B.T": "abt", "A.T @ B": "atb"}

# The ladder's steps on the plain matmul graph, then on the packed plan, make_plan's choice, its threads taken
# away or kept. "upcast 8x8 + thread" is the default before packing.
LADDER: dict[str, Opts | str] = {
    "naive": Opts(),
    "vector lanes alone: 16 columns": Opts(vector=(1, 16)),
    "register tile 8x8 (scalar)": Opts(upcast={0: 8, 1: 8}),
    "register tile 4x64 (vectors)": Opts(vector=(1, 16), upcast={0: 4, 1: 4}),
    "+ packing B into panels": "packed",
    "+ threads (the default plan)": "packed+threads",
    "upcast 8x8 + thread": Opts(upcast={0: 8, 1: 8}, thread=0),
}


def matmul_graph(m: int, k: int, n: int, layout: str) -> UOp:
    """C (m x n) = A @ B, A @ B.T or A.T @ B, with A (slot 0) stored (m, k), or (k, m) for "atb", and B
    (slot 1) stored (k, n), or (n, k) for "abt": reshape, expand, multiply, sum, as Tensor.matmul builds it
    and as autodiff builds a weight's gradient."""
    a = UOp.buffer(0, m * k).reshape((k, m) if layout == "atb" else (m, k))
    b = UOp.buffer(1, k * n).reshape((n, k) if layout == "abt" else (k, n))
    a = a.permute((1, 0)) if layout == "atb" else a
    b_kn = b.permute((1, 0)) if layout == "abt" else b  # B as (k, n)
    products = a.reshape((m, 1, k)).expand((m, n, k)) * b_kn.permute((1, 0)).reshape((1, n, k)).expand((m, n, k))
    return products.sum([2]).reshape((m, n))


def plan_for(n: int, layout: str, opts: Opts | str) -> Plan:
    """The matmul's plan: "packed+threads", the C backend's default (make_plan packing for its threads);
    "packed", the same for one thread, without threads; "unpacked", the plan of a backend that does not pack
    (choose_opts's tile and threads); with Opts, the plain kernel under them."""
    graph, _ = normalize([matmul_graph(n, n, n, layout)])
    if opts == "unpacked":
        return make_plan(graph)
    if isinstance(opts, str):
        if opts == "packed+threads":
            return make_plan(graph, pack=get_backend("C").packing())
        plan = make_plan(graph, pack=1)
        kernels = tuple(dataclasses.replace(k, opts=dataclasses.replace(k.opts, thread=None)) for k in plan.kernels)
        return dataclasses.replace(plan, make_kernels=lambda: kernels)
    plain = make_plan(graph, opt=False)
    (kernel,) = plain.kernels
    return dataclasses.replace(plain, make_kernels=lambda: (Kernel(kernel.name, kernel.ast, opts),))


@dataclasses.dataclass(frozen=True)
class Times:
    """Seconds of one side's timed runs: their median and their minimum."""

    median: float
    least: float

    @staticmethod
    def of(runs: list[float]) -> Times:
        return Times(statistics.median(runs), min(runs))


def timed(fn: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> float:
    """The seconds one call of `fn` takes, on `clock`."""
    start = clock()
    fn()
    return clock() - start


def blocks(
    run: Callable[[], None], other: Callable[[], None] | None, repeats: int, one_thread: bool
) -> tuple[Times, Times | None]:
    """The times of `run` and of `other`: wall clock, in alternating blocks, each after a pause; on
    `one_thread`, thread CPU time, the two sides' runs alternating one by one."""
    if one_thread:
        return alternating(run, other, repeats)
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(ROUNDS):
        for fn, times in ((run, mine), (other, theirs)):
            if fn is None:
                continue
            # a pause before each block, not after it: uopc_runner checks a plan against numpy's matmul,
            # whose pool then spins, and the first block timed right after it ran at half speed (notes 160)
            time.sleep(PAUSE_S)
            fn()  # one untimed call: the pool wakes, the caches fill
            times.extend(timed(fn) for _ in range(repeats))
    return Times.of(mine), Times.of(theirs) if theirs else None


def alternating(run: Callable[[], None], other: Callable[[], None] | None, repeats: int) -> tuple[Times, Times | None]:
    """ROUNDS x repeats runs of each side, one of `run` then one of `other`, timed by this thread's CPU time:
    every kernel runs on this thread, and the time the machine's other load takes the core is not counted."""
    sides = [fn for fn in (run, other) if fn is not None]
    times: list[list[float]] = [[] for _ in sides]
    for fn in sides:
        fn()  # untimed: the caches fill
    for _ in range(ROUNDS * repeats):
        for fn, runs in zip(sides, times, strict=True):
            runs.append(timed(fn, time.thread_time))
    return Times.of(times[0]), Times.of(times[1]) if other is not None else None


def blas_kernel() -> str:
    """numpy's BLAS as threadpoolctl reads it from the loaded library: its name, version and the kernel it
    chose for this CPU (OpenBLAS picks one per CPU family at load time)."""
    from threadpoolctl import threadpool_info

    blas = next((i for i in threadpool_info() if i["user_api"] == "blas"), None)
    if blas is None:
        return "BLAS not found by threadpoolctl"
    return f"{blas['internal_api']} {blas['version']}, kernel {blas.get('architecture', 'unknown')}"


def limit_threads(threads: int) -> contextlib.AbstractContextManager[object]:
    """Every side on `threads` threads: OMP_NUM_THREADS for uopc's OpenMP loops (read when libgomp loads,
    with the first compiled kernel) and threadpoolctl's limit on numpy's BLAS, entered once for the whole
    run. PyTorch's process sets its own (torch_child)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    from threadpoolctl import threadpool_limits

    limits: contextlib.AbstractContextManager[object] = threadpool_limits(limits=threads)
    return limits


def operands(n: int) -> tuple[Array, Array]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)


def numpy_runner(a: Array, b: Array, layout: str) -> tuple[Callable[[], None], Array]:
    """numpy's matmul of the layout into a preallocated output (as uopc's is), and that output."""
    x, y = (a.T, b) if layout == "atb" else (a, b.T) if layout == "abt" else (a, b)
    out = np.empty((a.shape[0], b.shape[0]), np.float32)

    def run() -> None:
        np.matmul(x, y, out=out)

    return run, out


Runner = tuple[Callable[[], None], float]


def uopc_runner(plan: Plan, a: Array, b: Array, layout: str, beam: int | None = None) -> Runner:
    """The compiled plan (its kernels' opts searched with a `beam`), run once and checked against numpy, as a
    function of no arguments; and the seconds the search took."""
    backend = get_backend("C")
    compiled = compile_plan(plan, backend, beam=beam)
    # the output and the packed copies from the runtime, as Tensor has them: aligned to a cache line
    buffers = [a.reshape(-1), b.reshape(-1), *(backend.runtime.allocate(s.dtype, s.size) for s in plan.buffers[2:])]
    compiled.executable.run(buffers)
    n = a.shape[0]
    reference, want = numpy_runner(a, b, layout)
    reference()
    got = buffers[plan.outputs[0]].reshape(n, n)
    if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * np.sqrt(n)):
        raise SystemExit(f"{layout} n={n}: wrong result, max error {np.abs(got - want).max()}")
    return lambda: compiled.executable.run(buffers), compiled.times.search


def torch_runner(a: Array, b: Array, layout: str) -> Callable[[], None]:
    import torch

    x, y = torch.from_numpy(a), torch.from_numpy(b)
    x, y = (x.T, y) if layout == "atb" else (x, y.T) if layout == "abt" else (x, y)
    out = torch.empty(a.shape, dtype=torch.float32)

    def run() -> None:
        torch.matmul(x, y, out=out)

    return run


def torch_child(sizes: list[int], repeats: int, threads: int | None) -> dict[str, Any]:
    """In PyTorch's process: its version, and its median seconds for each size and layout, keyed "n layout",
    over ROUNDS x repeats runs back to back after a few untimed ones (no other pool shares this process, so
    nothing to pause for); thread CPU time on one thread, as `alternating` times."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    medians = {}
    for n in sizes:
        a, b = operands(n)
        for layout in LAYOUTS.values():
            run = torch_runner(a, b, layout)
            for _ in range(3):
                run()
            medians[f"{n} {layout}"] = statistics.median(timed(run, clock) for _ in range(ROUNDS * repeats))
    return {"version": torch.__version__, "medians": medians}


def torch_times(sizes: list[int], repeats: int, threads: int | None) -> dict[str, Any]:
    """torch_child's answer, from a process of its own (the module's docstring says why); empty where
    PyTorch is not installed."""
    command = [sys.executable, __file__, "--torch-child", "--sizes", *map(str, sizes), "--repeats", str(repeats)]
    command += ["--threads", str(threads)] if threads else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 and "No module named 'torch'" in done.stderr:
        return {}
    if done.returncode != 0:
        raise SystemExit(f"timing PyTorch failed:\n{done.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def row(
    name: str, n: int, uopc: Times, numpy: Times | None, torch_s: float | None, searched: tuple[float, float] | None
) -> str:
    """A table row; `searched` is the searched plan's median seconds and the seconds its search took."""

    def gflops(s: float | None) -> str:
        return "" if s is None else f"{2 * n**3 / s / 1e9:.1f}"

    cells = [name, f"{uopc.median * 1e3:.2f}", f"{uopc.least * 1e3:.2f}", gflops(uopc.median)]
    cells += [gflops(None if numpy is None else numpy.median), gflops(torch_s) or "n/a"]
    cells += ["", ""] if numpy is None else [f"{numpy.median / uopc.median:.2f}x", f"{numpy.least / uopc.least:.2f}x"]
    cells += ["", ""] if searched is None else [gflops(searched[0]), f"{searched[1]:.1f}"]
    return "| " + " | ".join(cells) + " |"


def ladder(n: int, repeats: int, one_thread: bool) -> list[str]:
    a, b = operands(n)
    numpy_run, _ = numpy_runner(a, b, "ab")
    lines = []
    for name, opts in LADDER.items():
        run, _ = uopc_runner(plan_for(n, "ab", opts), a, b, "ab")
        slow = name == "naive"  # a second a run at 1024: fewer runs, no numpy
        uopc_t, numpy_t = blocks(run, None if slow else numpy_run, 1 if slow else repeats, one_thread)
        lines.append(row(name, n, uopc_t, numpy_t, None, None))
        print(lines[-1], flush=True)
    numpy_t, _ = blocks(numpy_run, None, repeats, one_thread)
    lines.append(row("numpy matmul", n, numpy_t, numpy_t, None, None))
    return lines


def layouts(
    sizes: list[int], repeats: int, unpacked: bool, beam: int, one_thread: bool, torch_s: dict[str, float]
) -> list[str]:
    """The default plan of each layout and size, and with a `beam`, the same plan searched; with `unpacked`,
    also the plan without packing (choose_opts's tile and threads on the plain matmul), to see from which size
    packing pays."""
    lines = []
    for n in sizes:
        a, b = operands(n)
        for product, layout in LAYOUTS.items():
            numpy_run, _ = numpy_runner(a, b, layout)
            plans = {f"{product}, n = {n}": "packed+threads"}
            if unpacked:
                plans[f"{product}, n = {n}, not packed"] = "unpacked"
            for name, which in plans.items():
                run, _ = uopc_runner(plan_for(n, layout, which), a, b, layout)
                uopc_t, numpy_t = blocks(run, numpy_run, repeats, one_thread)
                searched = None
                if beam and which == "packed+threads":
                    best, search_s = uopc_runner(plan_for(n, layout, which), a, b, layout, beam)
                    searched = blocks(best, None, repeats, one_thread)[0].median, search_s
                lines.append(row(name, n, uopc_t, numpy_t, torch_s.get(f"{n} {layout}"), searched))
                print(lines[-1], flush=True)
    return lines


def main() -> None:
    # kernels are timed right after they are built: without this, a background gcc -O3 (the tiered build)
    # would share the cores with the timing, and the first runs would be the quick tier's
    os.environ.setdefault("UOPC_TIERED", "0")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ladder-size", type=positive_int, default=1024, help="n of the ladder's matmul")
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed runs per block (default 5)")
    parser.add_argument("--out", type=output_file, help="also write the table (markdown) to this file")
    parser.add_argument("--no-ladder", action="store_true", help="only the layouts")
    parser.add_argument("--compare-unpacked", action="store_true", help="also time each layout without packing")
    parser.add_argument("--beam", type=non_negative_int, default=2, help="searched column's beam width (0: none)")
    parser.add_argument(
        "--threads", type=positive_int, help="run every side on this many threads (1: timed by thread CPU time)"
    )
    parser.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_child:
        print(json.dumps(torch_child(args.sizes, args.repeats, args.threads)))
        return

    one_thread = args.threads == 1
    header = HEADER + "\n" + "| --- " + "| ---: " * 9 + "|"
    pytorch = torch_times(args.sizes, args.repeats, args.threads)
    print(header, flush=True)
    with limit_threads(args.threads) if args.threads else contextlib.nullcontext():
        steps = [] if args.no_ladder else ladder(args.ladder_size, args.repeats, one_thread)
        medians = pytorch.get("medians", {})
        lines = steps + layouts(args.sizes, args.repeats, args.compare_unpacked, args.beam, one_thread, medians)
    timing = (
        f"ONE THREAD for every side, times are this thread's CPU time (time.thread_time); medians and minima of "
        f"{ROUNDS * args.repeats} runs, uopc and numpy (OpenBLAS) runs alternating one by one"
        if one_thread
        else f"{args.threads or 'all'} threads; wall-clock medians and minima of {ROUNDS} rounds of {args.repeats} "
        f"runs, uopc and numpy (OpenBLAS) timed in alternating blocks with {PAUSE_S} s pauses"
    )
    peer = f"PyTorch {pytorch['version']}, in a process of its own, runs back to back" if pytorch else "no PyTorch"
    about = (
        f"float32 matmuls: the ladder is A @ B at n = {args.ladder_size}, the other rows uopc's default plan "
        f"for the C backend; {timing}; load average {os.getloadavg()[0]:.1f} at the end; "
        f"{os.cpu_count()} CPUs ({platform.machine()}), CC={compiler()}, "
        f"CFLAGS={cflags()}, numpy {np.__version__} ({blas_kernel()}); {peer}; searched: the default plan "
        f"with each kernel's opts found by a beam search of width {args.beam}, and the seconds the search took"
    )
    text = "\n".join([about, "", header, *lines]) + "\n"
    if args.out is not None:
        stamp.write(args.out, text, [*(f"packages/{p}/src" for p in MEASURES), __file__])


if __name__ == "__main__":
    main()
