"""Benchmark uopc on a GPU (DEVICE=CUDA) against PyTorch on the same GPU: a float32 GEMM, a float16 GEMM (tensor
cores, float32 sums), a row softmax, and one training step of a GPT-like block (attention and an MLP).

Each workload runs once as a warm-up (building its plan and kernels, and checked against numpy), then is timed
`--repeats` times; the table gives the median time of uopc and of PyTorch, and uopc's speed as a fraction of
PyTorch's. Where there is no GPU, it says so and prints instead what ptxas reports for the GEMM and softmax
kernels uopc renders at these sizes (registers per thread, shared memory per block, spilled bytes), for sm_80
and sm_90: the part of the benchmark that needs only nvcc.

    python scripts/bench_gpu.py                           # on a GPU: 2048 x 2048 GEMMs, softmax, GPT step
    python scripts/bench_gpu.py --size 64 --device EMU    # the same code on the emulator, PyTorch on the CPU
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from arguments import positive_int

from uopc.backend.cuda import CUDAError, NVCCNotFound, device_name, lower_gpu, ptxas_report, render_cuda
from uopc.ir import Ops, UOp, dtypes
from uopc.lower import Kernel, make_plan, normalize

Timed = Callable[[], Any]  # one run of a workload, finished (synchronized) when it returns


def median_seconds(run: Timed, repeats: int) -> float:
    run()  # the warm-up builds the plan and its kernels
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- the workloads, in uopc ----------------------------------------------------------------------------------


def uopc_workloads(n: int, rng: np.random.Generator) -> dict[str, tuple[Timed, Callable[[], None]]]:
    """Each workload as (a timed run, a check of its result against numpy)."""
    from uopc.tensor import Tensor

    a32, b32 = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    a16, b16 = a32.astype(np.float16), b32.astype(np.float16)
    x = rng.standard_normal((n, n)).astype(np.float32)
    ta32, tb32, ta16, tb16, tx = (Tensor(v) for v in (a32, b32, a16, b16, x))
    step, check_step = gpt_step(n, rng)

    def check_gemm(a: Any, b: Any, got: str, rtol: float) -> Callable[[], None]:
        want = a.astype(np.float64) @ b
        return lambda: np.testing.assert_allclose(out[got].float().numpy(), want, rtol=rtol, atol=rtol * n)

    out: dict[str, Tensor] = {}

    def run(name: str, make: Callable[[], Tensor]) -> Timed:
        def once() -> None:
            out[name] = make().realize()

        return once

    e = np.exp(x - x.max(-1, keepdims=True))
    return {
        "GEMM float32": (run("g32", lambda: ta32 @ tb32), check_gemm(a32, b32, "g32", 1e-4)),
        "GEMM float16": (run("g16", lambda: ta16 @ tb16), check_gemm(a16, b16, "g16", 1e-2)),
        "softmax": (
            run("sm", lambda: tx.softmax(-1)),
            lambda: np.testing.assert_allclose(out["sm"].numpy(), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6),
        ),
        "GPT-like step": (step, check_step),
    }


def gpt_step(n: int, rng: np.random.Generator) -> tuple[Timed, Callable[[], None]]:
    """One SGD step of a block: causal attention (one head) and a GELU MLP, each with a residual, on a batch
    of 8 sequences of n/8 tokens of width n/8; the loss is the mean square of the output."""
    from uopc.tensor import Tensor
    from uopc.tensor.optim import SGD

    t, d = max(2, n // 8), max(2, n // 8)
    shapes = [(d, d), (d, d), (d, d), (d, 4 * d), (4 * d, d)]
    params = [Tensor((rng.standard_normal(s) / math.sqrt(s[0])).astype(np.float32), requires_grad=True) for s in shapes]
    x = Tensor(rng.standard_normal((8, t, d)).astype(np.float32))
    opt = SGD(params, lr=1e-3)
    losses: list[float] = []

    def step() -> None:
        wq, wk, wv, w1, w2 = params
        q, k, v = x @ wq, x @ wk, x @ wv
        causal = Tensor.arange(t).reshape(t, 1) >= Tensor.arange(t).reshape(1, t)
        h = x + causal.where(q @ k.transpose(-2, -1) / math.sqrt(d), -math.inf).softmax(-1) @ v
        y = h + (h @ w1).gelu() @ w2
        loss = (y * y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    def check() -> None:
        assert all(math.isfinite(v) for v in losses), losses

    return step, check


# --- the same workloads in PyTorch ---------------------------------------------------------------------------


def torch_workloads(n: int, rng: np.random.Generator, device: str) -> dict[str, Timed] | None:
    try:
        import torch
    except ImportError:
        return None

    def synced(f: Callable[[], Any]) -> Timed:
        def once() -> None:
            f()
            if device == "cuda":
                torch.cuda.synchronize()

        return once

    def tensor(shape: tuple[int, ...], dtype: Any = torch.float32) -> Any:
        return torch.tensor(rng.standard_normal(shape), dtype=dtype, device=device)

    a32, b32, x = tensor((n, n)), tensor((n, n)), tensor((n, n))
    a16, b16 = tensor((n, n), torch.half), tensor((n, n), torch.half)
    t = d = max(2, n // 8)
    params = [tensor(s).div_(math.sqrt(s[0])).requires_grad_() for s in [(d, d)] * 3 + [(d, 4 * d), (4 * d, d)]]
    xs = tensor((8, t, d))
    opt = torch.optim.SGD(params, lr=1e-3)
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=device))

    def step() -> None:
        wq, wk, wv, w1, w2 = params
        q, k, v = xs @ wq, xs @ wk, xs @ wv
        h = xs + (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~causal, -math.inf).softmax(-1) @ v
        y = h + torch.nn.functional.gelu(h @ w1, approximate="tanh") @ w2
        loss = (y * y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    return {
        "GEMM float32": synced(lambda: a32 @ b32),
        "GEMM float16": synced(lambda: a16 @ b16),
        "softmax": synced(lambda: x.softmax(-1)),
        "GPT-like step": step,
    }


# --- without a GPU: what ptxas says about the kernels --------------------------------------------------------


def report_kernels(n: int) -> None:
    """The registers, shared memory and spills of the GEMM and softmax kernels at size n, per architecture."""
    x = UOp.buffer(0, n * n).reshape((n, n))
    softmax_e = (x - x.reduce(Ops.MAX, [1]).expand((n, n))).exp()
    graphs = {"softmax": softmax_e / softmax_e.sum([1]).expand((n, n))}
    for dt in (dtypes.float32, dtypes.float16):
        a = UOp.buffer(0, n * n, dt).reshape((n, 1, n)).expand((n, n, n))
        b = UOp.buffer(1, n * n, dt).reshape((n, n)).permute((1, 0)).reshape((1, n, n)).expand((n, n, n))
        graphs[f"gemm_{dt.name}"] = (a * b).sum([2]).reshape((n, n))
    print(f"{'workload':<16} {'kernel':<24} {'arch':<6} {'block':>6} {'regs':>5} {'smem B':>7} {'spill B':>8}")
    for what, root in graphs.items():
        graph, _ = normalize([root])
        programs = [lower_gpu(Kernel(f"{what}_{i}", k.ast)) for i, k in enumerate(make_plan(graph).kernels)]
        threads = {p.name: p.launch.threads for p in programs}
        for arch in ("sm_80", "sm_90"):
            with tempfile.TemporaryDirectory() as folder:
                for r in ptxas_report(render_cuda(programs), arch, Path(folder)):
                    print(
                        f"{what:<16} {r.name:<24} {arch:<6} {threads[r.name]:>6} "
                        f"{r.registers:>5} {r.shared_bytes:>7} {r.spill_bytes:>8}"
                    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=positive_int, default=2048, help="n of the GEMMs and softmax (default 2048)")
    parser.add_argument("--repeats", type=positive_int, default=10, help="timed runs per workload (default 10)")
    parser.add_argument("--device", choices=["CUDA", "EMU"], default="CUDA", help="uopc's device (default CUDA)")
    args = parser.parse_args()
    if args.device == "CUDA":
        try:
            gpu = device_name()
        except CUDAError as e:
            print(f"no GPU here, nothing timed ({e})\n")
            try:
                report_kernels(args.size)
            except NVCCNotFound as missing:
                print(f"and no ptxas report either: {missing}")
            return 0
    else:
        gpu = "none: uopc on the emulator, PyTorch on the CPU"
    os.environ["DEVICE"] = args.device
    rng = np.random.default_rng(0)
    ours = uopc_workloads(args.size, rng)
    theirs = torch_workloads(args.size, rng, "cuda" if args.device == "CUDA" else "cpu")
    print(f"GPU: {gpu}; n = {args.size}, median of {args.repeats} runs\n")
    print(f"{'workload':<16} {'uopc ms':>9} {'PyTorch ms':>11} {'uopc/PyTorch speed':>19}")
    for name, (run, check) in ours.items():
        mine = median_seconds(run, args.repeats)
        check()
        other = median_seconds(theirs[name], args.repeats) if theirs else math.nan
        print(f"{name:<16} {mine * 1e3:>9.3f} {other * 1e3:>11.3f} {other / mine:>19.2f}")
    if theirs is None:
        print("\nPyTorch is not installed here: its column is empty", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
