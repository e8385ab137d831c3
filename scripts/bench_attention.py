"""Time and peak memory of causal attention, three ways in uopc and once in PyTorch, at growing lengths.

One head of dimension 64, float32, the forward pass: uopc's plain composition (scores materialized), its
online kernel (one pass over the keys per query) and its tiled kernel (flash attention), and PyTorch's
scaled_dot_product_attention on the CPU with as many threads as uopc's kernels get. Each (form, length)
runs in a fresh child process (this script, run again): a warm-up call (which compiles), then the timed
calls; the table gives the median. Peak memory is how far the process's resident memory rose above where
it stood before the last call (the kernel's high-water mark, reset through /proc/self/clear_refs), with
glibc returning every block above 64 KiB at once (MALLOC_MMAP_THRESHOLD_), so freed memory does not hide
the next call's. For that last call uopc's memory planning is off (`realizer.share_memory`): a plan keeps
its intermediates' storage from one run to the next, which would hide the memory a call needs.
PyTorch is left out if it is not installed.

A second table does the same for the forward and the backward pass together (the gradients of q, k and v
from a given output gradient): the plain and online forms' backward is composed of tensor ops and keeps the
probability matrix, the tiled form's is two kernels (FlashAttention-2's), PyTorch's is its own.

A third table times a training step (forward, backward, AdamW) of the GPT that `hatch run gpt` trains
(scripts/gpt.py, its default size, on random characters) with each of uopc's three kernels in its attention.

    python scripts/bench_attention.py                                  # 128 .. 4096
    python scripts/bench_attention.py --lengths 128 512 --repeats 3 --gpt-steps 0 --no-backward
    python scripts/bench_attention.py --out docs/outputs/bench_attention.txt
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import stamp
from arguments import non_negative_int, output_file, positive_int

FORMS = ["plain", "online", "tiled", "torch"]
DIM = 64
MEASURES = [f"packages/uopc-{p}/src" for p in ("ir", "lower", "backend-c", "tensor")]


def resident_kib(field: str) -> int:
    """VmRSS (now) or VmHWM (the peak since the last reset) of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def attention_call(form: str, length: int) -> Callable[[], object]:
    """One causal attention of the given form on fresh random inputs, computed to the end."""
    rng = np.random.default_rng(length)
    q, k, v = (rng.standard_normal((1, length, DIM)).astype(np.float32) for _ in range(3))
    if form == "torch":
        import torch

        torch.set_num_threads(stamp.thread_count())
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        return lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).numpy()
    from uopc.tensor import Tensor

    uq, uk, uv = Tensor(q), Tensor(k), Tensor(v)
    return lambda: uq.scaled_dot_product_attention(uk, uv, is_causal=True, kernel=form).numpy()


def attention_grad_call(form: str, length: int) -> Callable[[], object]:
    """The forward and backward pass of one causal attention: d q, d k and d v of sum(out * d_out), computed."""
    rng = np.random.default_rng(length)
    q, k, v, d_out = (rng.standard_normal((1, length, DIM)).astype(np.float32) for _ in range(4))
    if form == "torch":
        import torch

        torch.set_num_threads(stamp.thread_count())

        def torch_step() -> object:
            tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
            out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            out.backward(torch.from_numpy(d_out))
            return [t.grad.numpy() for t in (tq, tk, tv) if t.grad is not None]

        return torch_step
    from uopc.tensor import Tensor

    def step() -> object:
        uq, uk, uv = (Tensor(a, requires_grad=True) for a in (q, k, v))
        out = uq.scaled_dot_product_attention(uk, uv, is_causal=True, kernel=form)
        (out * Tensor(d_out)).sum().backward()
        return [t.grad.numpy() for t in (uq, uk, uv) if t.grad is not None]

    return step


def gpt_step_call(form: str) -> Callable[[], object]:
    """One training step of the default GPT (train_gpt.py's "small" preset) with `form` in every attention."""
    from gpt import GPT, Config

    from uopc.tensor import Tensor
    from uopc.tensor.nn import MultiHeadAttention
    from uopc.tensor.optim import AdamW

    Tensor.manual_seed(0)
    model = GPT(Config(vocab_size=65, block_size=64, dim=64, heads=4, layers=2))
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.kernel = form
    opt = AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)

    def step() -> None:
        tokens = rng.integers(0, 65, (32, 65)).astype(np.int32)
        loss = model(Tensor(tokens[:, :-1])).cross_entropy(Tensor(tokens[:, 1:]))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        loss.item()

    return step


def child(form: str, length: int, repeats: int, backward: bool) -> dict[str, float]:
    if length == 0:
        call = gpt_step_call(form)
    else:
        call = attention_grad_call(form, length) if backward else attention_call(form, length)
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    if form != "torch":  # the call's own arrays: plans keep their intermediates' storage between runs otherwise
        from uopc.tensor.realize import realizer

        realizer.share_memory = False
    before = resident_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
    call()
    peak = resident_kib("VmHWM") - before
    return {"first_s": first, "median_ms": statistics.median(times) * 1e3, "peak_mib": max(peak, 0) / 1024}


def measure(form: str, length: int, repeats: int, backward: bool = False) -> dict[str, float]:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    argv = [sys.executable, __file__, "--child", form, str(length), str(repeats), str(int(backward))]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{form} at length {length} (backward: {backward}) failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def table(results: dict[tuple[str, int], dict[str, float]], forms: list[str], lengths: list[int]) -> str:
    columns = [f"{f} (ms)" for f in forms] + [f"{f} (MiB)" for f in forms]
    head = "| length | " + " | ".join(columns) + " |"
    rule = "| ---: |" + " ---: |" * (2 * len(forms))
    rows = [head, rule]
    for n in lengths:
        times = [f"{results[f, n]['median_ms']:.1f}" for f in forms]
        peaks = [f"{results[f, n]['peak_mib']:.1f}" for f in forms]
        rows.append(f"| {n} | " + " | ".join(times + peaks) + " |")
    return "\n".join(rows)


def main() -> None:
    # kernels are timed right after they are built: without this, a background gcc -O3 (the tiered build)
    # would share the cores with the timing, and the first runs would be the quick tier's
    os.environ.setdefault("UOPC_TIERED", "0")
    if sys.argv[1:2] == ["--child"]:
        form, length, repeats, backward = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
        print(json.dumps(child(form, length, repeats, backward)))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096])
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed calls after the warm-up (default 5)")
    parser.add_argument("--gpt-steps", type=non_negative_int, default=10, help="timed GPT steps (10; 0: none)")
    parser.add_argument("--no-backward", action="store_true", help="leave out the forward-and-backward table")
    parser.add_argument("--out", type=output_file, help="also write the table (markdown) to this file")
    args = parser.parse_args()
    forms = [f for f in FORMS if f != "torch" or importlib.util.find_spec("torch") is not None]
    results = {}
    for n in args.lengths:
        for form in forms:
            results[form, n] = measure(form, n, args.repeats)
            print(f"length {n:5d}  {form:6s}  {results[form, n]['median_ms']:9.1f} ms", file=sys.stderr, flush=True)
    header = (
        f"causal attention, one head, head dim {DIM}, float32, forward pass: median of {args.repeats} calls after a "
        f"warm-up, and the peak rise of resident memory during one call; {stamp.thread_count()} threads"
    )
    text = f"{header}\n\n{table(results, forms, args.lengths)}\n"
    if not args.no_backward:
        both = {}
        for n in args.lengths:
            for form in forms:
                both[form, n] = measure(form, n, args.repeats, backward=True)
                print(f"length {n:5d}  {form:6s}  {both[form, n]['median_ms']:9.1f} ms (+ backward)", file=sys.stderr)
        text += (
            "\nThe same, forward and backward pass (the gradients of q, k and v; the tiled form's backward is "
            f"its two kernels, the others' keep the probabilities)\n\n{table(both, forms, args.lengths)}\n"
        )
    if args.gpt_steps:
        steps = {form: measure(form, 0, args.gpt_steps) for form in FORMS[:3]}
        rows = [f"| {form} | {r['median_ms']:.1f} |" for form, r in steps.items()]
        text += (
            f"\nA training step of the default GPT (2 layers, 4 heads of 16, context 64, batch 32): median of "
            f"{args.gpt_steps} steps after the first\n\n| attention | step (ms) |\n| --- | ---: |\n"
            + "\n".join(rows)
            + "\n"
        )
    stamp.emit(text, args.out, [*MEASURES, __file__])


if __name__ == "__main__":
    main()
