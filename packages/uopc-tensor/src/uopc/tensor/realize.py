"""realize: compute lazy graphs by running their plan on a backend, and own the buffers that result.

A realized tensor is a BUFFER node; the data behind it lives in `BUFFERS`, keyed weakly by that node, so
it is freed when no graph refers to the node any more. Plans come from kernelize's cache: a graph that has
been seen before (up to which buffers it reads) runs without scheduling or compiling anything.
"""

from __future__ import annotations

import itertools
import os
import time
import weakref
from collections.abc import Sequence
from typing import Any

from uopc.ir import BufferArg, DType, Ops, UOp
from uopc.lower import Backend, Plan, PlanCache, get_backend, normalize
from uopc.tensor.errors import TensorError

BUFFERS: weakref.WeakKeyDictionary[UOp, Any] = weakref.WeakKeyDictionary()
COMPUTED: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
"""Graphs computed already but kept by their tensor (backward() walks them): graph -> the BUFFER holding its value."""
PLANS = PlanCache()
_buffer_ids = itertools.count()


def debug_level() -> int:
    """DEBUG as a level from 0 to 4; a value that is not a number is refused with a message naming it."""
    text = os.environ.get("DEBUG", "0").strip() or "0"
    if not text.isdigit():
        raise TensorError(f"DEBUG must be a level from 0 to 4, got {text!r}")
    return int(text)


def optimizer_on() -> bool:
    """Whether kernels get the default opts (upcast, threads): OPT=0 turns them off, to compare."""
    return os.environ.get("OPT", "1") != "0"


def new_buffer(data: Any, dtype: DType) -> UOp:
    """A BUFFER node for a flat backend buffer; each call makes a distinct node."""
    u = UOp(Ops.BUFFER, dtype, (), BufferArg(next(_buffer_ids), int(data.size)))
    BUFFERS[u] = data
    return u


def _executable(plan: Plan, backend: Backend) -> Any:
    exe = plan.executables.get(backend.name)
    if exe is None:
        if debug_level() >= 4:
            for k in plan.kernels:
                print(backend.render(k))
        exe = plan.executables[backend.name] = backend.compile(plan.kernels, plan.steps)
    return exe


def _run_each(plan: Plan, exe: Any, buffers: list[Any]) -> None:
    """DEBUG >= 2: run the kernels one at a time, timing each (twice at DEBUG >= 3)."""
    for step in plan.steps:
        kernel, args = plan.kernels[step.kernel], [buffers[b] for b in step.buffers]
        times = []
        for _ in range(2 if debug_level() >= 3 else 1):
            start = time.perf_counter()
            exe.run_kernel(step.kernel, args)
            times.append(time.perf_counter() - start)
        gflops = kernel.flops / times[0] / 1e9 if times[0] > 0 else 0.0
        again = f"  (again: {times[1] * 1e3:.3f} ms)" if len(times) > 1 else ""
        print(f"  {kernel.name:32s} {times[0] * 1e3:9.3f} ms {gflops:9.2f} GFLOP/s{again}")


# --8<-- [start:realize]
def realize(roots: Sequence[UOp], device: str) -> list[UOp]:
    """Compute `roots` on `device`; returns a BUFFER node holding each root's value."""
    start = time.perf_counter()
    graph, inputs = normalize(roots, COMPUTED)  # what was computed before is read, not recomputed
    plan, _ = PLANS.get(graph, optimizer_on())
    backend = get_backend(device)
    exe = _executable(plan, backend)
    scheduled = time.perf_counter()
    buffers = [BUFFERS[b] for b in inputs]
    buffers += [backend.allocate(spec.dtype, spec.size) for spec in plan.buffers[plan.n_inputs :]]
    if debug_level() >= 2:
        _run_each(plan, exe, buffers)
    else:
        exe.run(buffers)
    if debug_level() >= 1:
        ran = time.perf_counter()
        print(
            f"realize: {len(plan.kernels)} kernels, schedule {(scheduled - start) * 1e3:.1f} ms, "
            f"run {(ran - scheduled) * 1e3:.1f} ms"
        )
    return [inputs[o] if o < plan.n_inputs else new_buffer(buffers[o], plan.buffers[o].dtype) for o in plan.outputs]


# --8<-- [end:realize]
