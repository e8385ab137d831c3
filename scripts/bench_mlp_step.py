"""Time a small MLP's forward and backward pass: the first (compiling) call and a repeated one.

Each measurement runs in a fresh Python process, so nothing is cached in memory: once with an empty kernel
cache (cold: every kernel goes through gcc) and once more with the same cache folder (warm: the plans are
made again, but the compiled libraries are found on disk). The script runs itself as the child process.

    python scripts/bench_mlp_step.py                       # 784-128-10, batch 64
    python scripts/bench_mlp_step.py --hidden 256 --repeats 50
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from arguments import positive_int


@dataclass
class Measurement:
    """What one child process saw."""

    import_s: float  # importing uopc.tensor (and finding the backend)
    first_s: float  # the first forward + backward: plans made and kernels built (or loaded)
    repeat_ms: float  # median of the repeated calls, on new data each time
    repeat_min_ms: float
    plans: int  # plans made in the process
    kernels: int  # kernels in those plans
    libraries: int  # compiled libraries in the cache folder afterwards


def child(batch: int, sizes: list[int], repeats: int) -> Measurement:
    """Build the MLP, then time its forward and backward pass; the loss and gradients realize in one plan."""
    start = time.perf_counter()
    from uopc.tensor import Tensor, realizer

    imported = time.perf_counter()
    rng = np.random.default_rng(0)
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        w = rng.uniform(-1, 1, (fan_in, fan_out)) / np.sqrt(fan_in)
        params.append(Tensor(w.astype(np.float32), requires_grad=True))
        params.append(Tensor(np.zeros(fan_out, np.float32), requires_grad=True))

    def step() -> None:
        x = Tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
        y = Tensor(rng.integers(0, sizes[-1], batch).astype(np.int32))
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = h.relu()
        loss = h.cross_entropy(y)
        for p in params:
            p.grad = None
        loss.backward()
        Tensor.realize(loss, *(p.grad for p in params if p.grad is not None))
        loss.item()

    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    libraries = len(list(Path(os.environ["UOPC_CACHE"]).rglob("*.so")))
    plans = realizer.plans
    kernels = sum(len(plan.kernels) for plan in plans.plans.values())
    return Measurement(imported - start, first, statistics.median(times), min(times), plans.made, kernels, libraries)


def measure(cache: str, args: argparse.Namespace) -> Measurement:
    """Run `child` in a fresh process that uses `cache` as its kernel cache."""
    command = [sys.executable, __file__, "--child", "--batch", str(args.batch), "--hidden", str(args.hidden)]
    command += ["--repeats", str(args.repeats), "--inputs", str(args.inputs), "--classes", str(args.classes)]
    env = {**os.environ, "UOPC_CACHE": cache}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the child process failed:\n{done.stderr}")
    fields: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return Measurement(**fields)


def table(rows: list[tuple[str, Measurement]], title: str) -> str:
    head = f"{'kernel cache':14s}{'import s':>10s}{'first call s':>14s}{'repeat ms':>11s}{'(min)':>9s}"
    head += f"{'plans':>7s}{'kernels':>9s}{'.so files':>11s}"
    lines = [title, head]
    for name, m in rows:
        lines.append(
            f"{name:14s}{m.import_s:10.2f}{m.first_s:14.2f}{m.repeat_ms:11.2f}{m.repeat_min_ms:9.2f}"
            f"{m.plans:7d}{m.kernels:9d}{m.libraries:11d}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(
        description="Time an MLP's forward+backward in uopc: first (compiling) call and repeated calls, "
        "with a cold and a warm kernel cache, each in a fresh process."
    )
    p.add_argument("--batch", type=positive_int, default=64, help="rows per call (default 64)")
    p.add_argument("--inputs", type=positive_int, default=784, help="input features (default 784)")
    p.add_argument("--hidden", type=positive_int, default=128, help="hidden units (default 128)")
    p.add_argument("--classes", type=positive_int, default=10, help="output classes (default 10)")
    p.add_argument("--repeats", type=positive_int, default=20, help="timed calls after the first (default 20)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = [args.inputs, args.hidden, args.classes]
    if args.child:
        print(json.dumps(asdict(child(args.batch, sizes, args.repeats))))
        return
    with tempfile.TemporaryDirectory(prefix="uopc-bench-") as cache:
        rows = [("cold", measure(cache, args)), ("warm", measure(cache, args))]
    title = (
        f"MLP {'-'.join(map(str, sizes))}, batch {args.batch}: forward + backward, loss and gradients in one plan; "
        f"{os.cpu_count()} CPUs, a fresh process per row"
    )
    print(table(rows, title))


if __name__ == "__main__":
    main()
