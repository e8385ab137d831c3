"""Search: a kernel's opts chosen by running candidates on the machine, the winner kept for the next process.

choose_opts is a rule of thumb, measured on a few matmuls; what is fastest for a given kernel depends on
the cores, the caches and what gcc makes of the C. A beam search asks the machine instead. Starting from
the heuristic's choice (and from no opts at all), each step changes one field of each opts in the beam
(`actions`), times every new candidate on the real kernel, and keeps the `width` fastest; it stops when a
step finds nothing faster. A candidate that does not apply, linearize, render or compile is dropped.

The winner is kept in the backend's opts store under the kernel's key (`kernel_key`: the kernel's graph
and the lowering code), to which the store adds the machine (its CPU, threads, compiler and flags), so a
kernel is searched once per machine, and every later process, searching or not, uses the winner.
"""

from __future__ import annotations

import dataclasses
import hashlib
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from uopc.ir import AxisType, Ops, UOp, UopcError, prod, to_uir
from uopc.lower.backend import Backend, Executable
from uopc.lower.linearize import linearize_optimized
from uopc.lower.opt import MAX_UPCAST, TILE_NODES, Opts, apply_opts
from uopc.lower.stages import Kernel, LinearProgram

# The action space: the values each field of Opts may take, one field changed per step.
FACTORS = (1, 2, 4, 8)  # upcast of an output axis, unroll of a reduce axis (1: none)
LANES = (4, 8, 16)  # vector lanes: SSE, AVX2 and AVX-512 registers of float32
SEARCH_NODES = 2 * TILE_NODES  # copies (tile x unroll) x body nodes, at most: what gcc builds in seconds
MAX_STEPS = 4  # steps of the beam after the first: each changes one field, so four reach most tiles

RUNS = 5  # timed samples per candidate, the median kept
SAMPLE_SECONDS = 2e-3  # a sample repeats a fast kernel until it lasts about this long
GIVE_UP = 3.0  # a candidate whose first run is this many times slower than the best so far is not sampled

Measure = Callable[[Sequence[Opts]], list[float | None]]  # candidates -> seconds each, None where it failed


def kernel_key(ast: UOp, code: str) -> str:
    """The name a kernel's searched opts are kept under: a digest of its graph's text and of the lowering
    code (`code`, pipeline.lowering_code), which gives the axis numbers of Opts their meaning."""
    return hashlib.sha256("\0".join(["opts", to_uir(ast), code]).encode()).hexdigest()


def actions(kernel: UOp, opts: Opts) -> list[Opts]:
    """Every opts one change away from `opts` that applies to `kernel`: one output axis upcast by another
    factor (or none), one reduce axis unrolled by another factor, the thread on another output axis (or
    none: Opts runs a threaded loop on every core, so the thread count is all or one), the vector on another
    output axis or with other lanes (or none). Candidates whose copies of the body would swamp gcc
    (SEARCH_NODES) or that apply_opts refuses are left out."""
    ranges = sorted((u for u in kernel.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg.axis)
    outputs = [r.arg.axis for r in ranges if r.arg.kind is AxisType.LOOP]
    reduces = [r.arg.axis for r in ranges if r.arg.kind is AxisType.REDUCE]
    changed = [
        *(_with(opts, upcast=_set(opts.upcast, a, f)) for a in outputs for f in FACTORS),
        *(_with(opts, unroll=_set(opts.unroll, a, f)) for a in reduces for f in FACTORS),
        *(_with(opts, thread=a) for a in [None, *outputs]),
        *(_with(opts, vector=v) for v in [None, *((a, n) for a in outputs for n in LANES)]),
    ]
    body = sum(1 for u in kernel.toposort() if u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_GLOBAL))
    seen, out = {opts.key()}, []
    for c in changed:
        copies = prod(c.upcast.values()) * prod(c.unroll.values())
        if c.key() in seen or copies > MAX_UPCAST or copies * body > SEARCH_NODES or not applies(kernel, c):
            continue
        seen.add(c.key())
        out.append(c)
    return out


def _with(opts: Opts, **change: Any) -> Opts:
    return dataclasses.replace(opts, **change)


def _set(factors: dict[int, int], axis: int, n: int) -> dict[int, int]:
    return {a: f for a, f in {**factors, axis: n}.items() if f > 1}


def applies(kernel: UOp, opts: Opts) -> bool:
    try:
        apply_opts(kernel, opts)
    except UopcError:
        return False
    return True


def beam_search(kernel: Kernel, width: int, measure: Measure) -> Opts:
    """The fastest opts for `kernel` that a beam of `width` finds, from the kernel's own opts (the
    heuristic's) and from none; the kernel's own opts if no candidate could be timed."""
    start = [kernel.opts] + ([Opts()] if Opts().key() != kernel.opts.key() else [])
    times: dict[tuple[object, ...], tuple[float, Opts]] = {}
    fresh: list[Opts] = start
    best = None
    for _ in range(1 + MAX_STEPS):
        for c, t in zip(fresh, measure(fresh), strict=True):
            times[c.key()] = (t if t is not None else float("inf"), c)
        beam = sorted(times.values(), key=lambda tc: tc[0])[:width]
        if beam[0][0] == float("inf") or (best is not None and beam[0][0] >= best):
            break
        best = beam[0][0]
        fresh = [c for _, o in beam for c in actions(kernel.ast, o) if c.key() not in times]
        fresh = list({c.key(): c for c in fresh}.values())
        if not fresh:
            break
    winner = min(times.values(), key=lambda tc: tc[0])
    return winner[1] if winner[0] < float("inf") else kernel.opts


def measure_on(backend: Backend, kernel: Kernel) -> Measure:
    """Time candidates for `kernel` on `backend`: each candidate's program, named apart, built into one
    source with the others (one compile per step of the beam; if it fails, each alone, to drop only the
    bad ones), then run on scratch buffers of the kernel's sizes, allocated once by the backend's runtime
    and never the user's. Their contents are whatever `allocate` gives: uopc's kernels compute no address
    from data they load, and divide integers by zero as 0, so any contents are safe to run on."""
    scratch = [backend.runtime.allocate(p.dtype, p.size) for p in kernel.params]
    best = [float("inf")]

    def measure(candidates: Sequence[Opts]) -> list[float | None]:
        programs = [_program(kernel, o, f"{kernel.name}_beam{i}") for i, o in enumerate(candidates)]
        out: list[float | None] = [None] * len(candidates)
        for where, (executable, index) in _built(backend, programs).items():
            seconds = out[where] = time_kernel(executable, index, scratch, best[0] * GIVE_UP)
            best[0] = min(best[0], seconds)
        return out

    return measure


def _program(kernel: Kernel, opts: Opts, name: str) -> LinearProgram | None:
    try:
        return linearize_optimized(dataclasses.replace(kernel, name=name), apply_opts(kernel.ast, opts))
    except UopcError:
        return None


def _built(backend: Backend, programs: Sequence[LinearProgram | None]) -> dict[int, tuple[Executable, int]]:
    """For each program that builds: its position -> the executable holding it, and its index there."""
    made = [(i, p) for i, p in enumerate(programs) if p is not None]
    if not made:
        return {}
    try:
        executable = _load(backend, [p for _, p in made])
        return {i: (executable, n) for n, (i, _) in enumerate(made)}
    except UopcError:
        if len(made) == 1:
            return {}
    out = {}
    for i, p in made:  # one bad candidate spoiled the batch: build each alone
        try:
            out[i] = (_load(backend, [p]), 0)
        except UopcError:
            continue
    return out


def _load(backend: Backend, programs: list[LinearProgram]) -> Executable:
    """The programs rendered, compiled and loaded with no steps; the optimized tier of a tiered build."""
    source = backend.renderer.render(programs, ())
    binary = backend.compiler.compile(source)
    if binary.later is not None:  # a quick build runs slower code than the plan would: time the real one
        binary = binary.later.result()
    return backend.runtime.load(binary, programs, ())


def time_kernel(executable: Executable, index: int, buffers: list[Any], give_up: float = float("inf")) -> float:
    """Seconds one run of program `index` takes: the median of RUNS samples after a warm-up run, each sample
    repeating the kernel for about SAMPLE_SECONDS; one run's time if that is already past `give_up`."""

    def run(times: int) -> float:
        start = time.perf_counter()
        for _ in range(times):
            executable.run_kernel(index, buffers)
        return (time.perf_counter() - start) / times

    run(1)  # the first run pages in the buffers and the code
    once = run(1)
    if once > give_up:
        return once
    repeats = max(1, min(1000, int(SAMPLE_SECONDS / max(once, 1e-7))))
    return statistics.median(run(repeats) for _ in range(RUNS))


def tuned_kernels(kernels: Sequence[Kernel], backend: Backend, beam: int, code: str) -> tuple[Kernel, ...]:
    """Each kernel with the opts its backend's opts store keeps for it; one without them keeps its own
    opts when `beam` is 0, and with a beam of that width gets searched ones, which the store then keeps.
    Each distinct kernel graph is looked up (and searched) once."""
    chosen: dict[UOp, Opts] = {}
    for k in kernels:
        if k.ast not in chosen:
            chosen[k.ast] = _choice(k, backend, beam, code)
    return tuple(dataclasses.replace(k, opts=chosen[k.ast]) for k in kernels)


def _choice(kernel: Kernel, backend: Backend, beam: int, code: str) -> Opts:
    store = backend.opts_store
    if store is None and beam == 0:
        return kernel.opts
    key = kernel_key(kernel.ast, code)
    found = store.find(key) if store is not None else None
    if found is not None:
        return found
    if beam == 0:
        return kernel.opts
    best = beam_search(kernel, beam, measure_on(backend, kernel))
    if store is not None:
        store.keep(key, best)
    return best
