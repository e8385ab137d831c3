"""realize: compute lazy graphs by running their plan on a backend, and own everything that keeps between calls.

All of that state lives in one object, `realizer` (a `Realizer`): the arrays behind realized tensors, the
values of graphs that backward() still walks, the leaves it computes gradients for, the plans, and what
each backend built from them. Its docstring says how long each part lives, and why.
"""

from __future__ import annotations

import itertools
import os
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uopc.ir import BufferArg, DType, Ops, UOp
from uopc.lower import Backend, CompiledPlan, Plan, PlanCache, compile_plan, get_backend, normalize

if TYPE_CHECKING:
    from uopc.tensor.tensor import Tensor


# --8<-- [start:realizer]
class Realizer:
    """The state that realize keeps between calls, one per process (`realizer`). What lives how long:

    - `buffers`: BUFFER node -> the backend array holding its data. Weak by node: an array lives as long as
      some graph (a tensor's, a computed value's) refers to its node, so dropping a tensor frees its memory.
    - `computed`: graph -> the BUFFER node (reshaped) holding its value, for a tensor that was computed but
      keeps its graph, because backward() walks it. Weak by graph: it goes when the tensor lets the graph go.
    - `leaves`: the tensors that require a gradient, by id. Weak: a leaf nobody holds any more is in no
      graph that backward() could walk. (By id, since a WeakSet would compare tensors with ==, elementwise.)
    - `plans`: plans by normalized graph. Bounded (least recently used out), and otherwise kept for the
      whole process: a training step that repeats finds its plan, and schedules nothing.
    - `compiled`: plan -> device -> the plan compiled on that device (its stages and its executable). Weak by
      plan: what was built for a plan lives exactly as long as the plan cache keeps the plan.
    - `seconds`: stage name -> seconds spent in it, summed over the process: `schedule` (normalizing graphs
      and finding or making their plans), the arrows of compile_plan (`opts`, `linearize`, `render`,
      `compile`, `load`) and `run`. scripts/bench_compile.py reads it around a training step.
    """

    def __init__(self) -> None:
        self.buffers: weakref.WeakKeyDictionary[UOp, Any] = weakref.WeakKeyDictionary()
        self.computed: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
        self.leaves: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
        self.plans = PlanCache()
        self.compiled: weakref.WeakKeyDictionary[Plan, dict[str, CompiledPlan]] = weakref.WeakKeyDictionary()
        self.seconds: Counter[str] = Counter()
        self._buffer_ids = itertools.count()

    def new_buffer(self, data: Any, dtype: DType) -> UOp:
        """A BUFFER node for a flat backend buffer; each call makes a distinct node."""
        u = UOp(Ops.BUFFER, dtype, (), BufferArg(next(self._buffer_ids), int(data.size)))
        self.buffers[u] = data
        return u

    def compile(self, plan: Plan, backend: Backend) -> tuple[CompiledPlan, bool]:
        """The plan compiled on `backend`, and whether it was compiled just now."""
        on_device = self.compiled.setdefault(plan, {})
        if backend.name in on_device:
            return on_device[backend.name], False
        compiled = on_device[backend.name] = compile_plan(plan, backend)
        self.seconds.update(vars(compiled.times))
        return compiled, True


realizer = Realizer()
# --8<-- [end:realizer]


def debug_level() -> int:
    """DEBUG as a level from 0 to 4; a value that is not a number is refused with a message naming it."""
    text = os.environ.get("DEBUG", "0").strip() or "0"
    if not text.isdigit():
        raise ValueError(f"DEBUG must be a level from 0 to 4, got {text!r}")
    return int(text)


def optimizer_on() -> bool:
    """Whether kernels get the default opts (upcast, threads): OPT=0 turns them off, to compare."""
    return os.environ.get("OPT", "1") != "0"


def _run_each(plan: Plan, compiled: CompiledPlan, buffers: list[Any]) -> None:
    """DEBUG >= 2: run the kernels one at a time, timing each (twice at DEBUG >= 3)."""
    for step in plan.steps:
        program, args = compiled.programs[step.kernel], [buffers[b] for b in step.buffers]
        times = []
        for _ in range(2 if debug_level() >= 3 else 1):
            start = time.perf_counter()
            compiled.executable.run_kernel(step.kernel, args)
            times.append(time.perf_counter() - start)
        gflops = program.flops / times[0] / 1e9 if times[0] > 0 else 0.0
        again = f"  (again: {times[1] * 1e3:.3f} ms)" if len(times) > 1 else ""
        print(f"  {program.name:32s} {times[0] * 1e3:9.3f} ms {gflops:9.2f} GFLOP/s{again}")


# --8<-- [start:realize]
def realize(roots: Sequence[UOp], device: str) -> list[UOp]:
    """Compute `roots` on `device`; returns a BUFFER node holding each root's value."""
    start = time.perf_counter()
    graph, inputs = normalize(roots, realizer.computed)  # what was computed before is read, not recomputed
    plan, _ = realizer.plans.get(graph, optimizer_on())
    realizer.seconds["schedule"] += time.perf_counter() - start
    backend = get_backend(device)
    compiled, new = realizer.compile(plan, backend)
    if new and debug_level() >= 4:
        print(compiled.source.text)
    scheduled = time.perf_counter()
    buffers = [realizer.buffers[b] for b in inputs]
    buffers += [backend.runtime.allocate(spec.dtype, spec.size) for spec in plan.buffers[plan.n_inputs :]]
    running = time.perf_counter()
    if debug_level() >= 2:
        _run_each(plan, compiled, buffers)
    else:
        compiled.executable.run(buffers)
    ran = time.perf_counter()
    realizer.seconds["run"] += ran - running
    if debug_level() >= 1:
        print(
            f"realize: {len(plan.kernels)} kernels, schedule {(scheduled - start) * 1e3:.1f} ms, "
            f"run {(ran - scheduled) * 1e3:.1f} ms"
        )
    return [
        inputs[o] if o < plan.n_inputs else realizer.new_buffer(buffers[o], plan.buffers[o].dtype) for o in plan.outputs
    ]


# --8<-- [end:realize]
