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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uopc.ir import BufferArg, DType, Ops, UOp
from uopc.lower import Backend, CompiledPlan, Plan, PlanCache, RealizeRecord, compile_plan, get_backend, normalize
from uopc.tensor.errors import TensorError
from uopc.tensor.viz import StagePages, viz_on

if TYPE_CHECKING:
    from uopc.tensor.tensor import Tensor


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
    - `pages`: with VIZ=1, the folder of this process's stage viewer pages and their titles (viz.py); kept
      for the whole process, so that its index lists every page.
    """

    def __init__(self) -> None:
        self.buffers: weakref.WeakKeyDictionary[UOp, Any] = weakref.WeakKeyDictionary()
        self.computed: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
        self.leaves: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
        self.plans = PlanCache()
        self.compiled: weakref.WeakKeyDictionary[Plan, dict[str, CompiledPlan]] = weakref.WeakKeyDictionary()
        self.pages = StagePages()
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
        on_device[backend.name] = compile_plan(plan, backend)
        return on_device[backend.name], True


realizer = Realizer()


def debug_level() -> int:
    """DEBUG as a level from 0 to 4; a value that is not a number is refused with a message naming it."""
    text = os.environ.get("DEBUG", "0").strip() or "0"
    if not text.isdigit():
        raise TensorError(f"DEBUG must be a level from 0 to 4, got {text!r}")
    return int(text)


def optimizer_on() -> bool:
    """Whether kernels get the default opts (upcast, threads): OPT=0 turns them off, to compare."""
    return os.environ.get("OPT", "1") != "0"


def _run_each(plan: Plan, compiled: CompiledPlan, buffers: list[Any]) -> tuple[float, ...]:
    """Run the kernels one at a time, timing each (twice at DEBUG >= 3), for DEBUG >= 2, which prints the
    times, and for VIZ's pages; returns each step's first time."""
    first = []
    for step in plan.steps:
        program, args = compiled.programs[step.kernel], [buffers[b] for b in step.buffers]
        times = []
        for _ in range(2 if debug_level() >= 3 else 1):
            start = time.perf_counter()
            compiled.executable.run_kernel(step.kernel, args)
            times.append(time.perf_counter() - start)
        first.append(times[0])
        if debug_level() >= 2:
            gflops = program.flops / times[0] / 1e9 if times[0] > 0 else 0.0
            again = f"  (again: {times[1] * 1e3:.3f} ms)" if len(times) > 1 else ""
            print(f"  {program.name:32s} {times[0] * 1e3:9.3f} ms {gflops:9.2f} GFLOP/s{again}")
    return tuple(first)


def realize(roots: Sequence[UOp], device: str) -> list[UOp]:
    """Compute `roots` on `device`; returns a BUFFER node holding each root's value."""
    start = time.perf_counter()
    graph, inputs = normalize(roots, realizer.computed)  # what was computed before is read, not recomputed
    plan, _ = realizer.plans.get(graph, optimizer_on())
    planned = time.perf_counter()
    backend = get_backend(device)
    compiled, new = realizer.compile(plan, backend)
    if new and debug_level() >= 4:
        print(compiled.source.text)
    scheduled = time.perf_counter()
    buffers = [realizer.buffers[b] for b in inputs]
    buffers += [backend.runtime.allocate(spec.dtype, spec.size) for spec in plan.buffers[plan.n_inputs :]]
    page = viz_on() and new  # a page per plan: a plan compiled before would show the same stages again
    run_seconds: tuple[float, ...] = ()
    if debug_level() >= 2 or page:
        run_seconds = _run_each(plan, compiled, buffers)
    else:
        compiled.executable.run(buffers)
    if debug_level() >= 1:
        ran = time.perf_counter()
        print(
            f"realize: {len(plan.kernels)} kernels, schedule {(scheduled - start) * 1e3:.1f} ms, "
            f"run {(ran - scheduled) * 1e3:.1f} ms"
        )
    if page:
        number = realizer.pages.next_number()
        realizer.pages.write(RealizeRecord(number, device, graph, plan, compiled, planned - start, run_seconds))
    return [
        inputs[o] if o < plan.n_inputs else realizer.new_buffer(buffers[o], plan.buffers[o].dtype) for o in plan.outputs
    ]
