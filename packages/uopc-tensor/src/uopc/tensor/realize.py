"""realize: compute lazy graphs by running their plan on a backend, and own everything that keeps between calls.

All of that state lives in one object, `realizer` (a `Realizer`): the arrays behind realized tensors, the
values of graphs that backward() still walks, the leaves it computes gradients for, the plans, and what
each backend built from them. Its docstring says how long each part lives, and why.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import time
import weakref
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uopc.ir import BufferArg, DType, Ops, UOp
from uopc.lower import (
    Backend,
    CompiledPlan,
    MemoryPlan,
    Plan,
    PlanCache,
    RealizeRecord,
    compile_plan,
    get_backend,
    normalize,
    plan_key,
    plan_memory,
    restore_plan,
)
from uopc.tensor.autodiff import CustomGradient
from uopc.tensor.errors import TensorError
from uopc.tensor.viz import StagePages, viz_on

if TYPE_CHECKING:
    from uopc.tensor.tensor import Tensor


@dataclass
class Launch:
    """One realize of a recorded call: the device, the plan it ran, compiled, the BUFFER nodes it read (in plan order),
    the arrays of all its plan buffers, and the BUFFER node it returned for each root."""

    device: str
    plan: Plan
    compiled: CompiledPlan
    inputs: list[UOp]
    buffers: list[Any]
    outputs: list[UOp]


@dataclass
class Recording:
    """What one call of a captured step did (capture.py): its launches in order, and the index checks it
    made on host values, each as the BUFFER node it read and the check to run on values like them."""

    name: str
    launches: list[Launch] = field(default_factory=list)
    checks: list[tuple[UOp, Callable[[Any], None]]] = field(default_factory=list)


class Realizer:
    """The state that realize keeps between calls, one per process (`realizer`). What lives how long:

    - `buffers`: BUFFER node -> the backend array holding its data. Weak by node: an array lives as long as
      some graph (a tensor's, a computed value's) refers to its node, so dropping a tensor frees its memory.
    - `computed`: graph -> the BUFFER node (reshaped) holding its value, for a tensor that was computed but
      keeps its graph, because backward() walks it. Weak by graph: it goes when the tensor lets the graph go.
    - `leaves`: the tensors that require a gradient, by id. Weak: a leaf nobody holds any more is in no
      graph that backward() could walk. (By id, since a WeakSet would compare tensors with ==, elementwise.)
    - `plans`: plans by normalized graph, made here or restored from the backend's plan store (a warm
      start). Bounded (least recently used out), and otherwise kept for the whole process: a training step
      that repeats finds its plan, and schedules nothing.
    - `compiled`: plan -> device -> the plan compiled on that device (its stages and its executable). Weak by
      plan: what was built for a plan lives exactly as long as the plan cache keeps the plan.
    - `seconds`: stage name -> seconds spent in it, summed over the process: `schedule` (normalizing graphs
      and finding or making their plans), the arrows of compile_plan (`search`, `opts`, `linearize`, `render`,
      `compile`, `load`) and `run`. scripts/bench_compile.py reads it around a training step.
    - `kernels`: (kernel graph, device) -> the kernel written in UOps (`attention.run_kernel`) compiled on
      that device. Kept for the whole process, as plans are: a training step calls the same kernels again.
    - `custom_gradients`: node -> how its gradient passes back (autodiff's CustomGradient), for the output of
      such a kernel, which has no graph back to its inputs. Weak by node: it goes with the tensor's graph.
    - `pages`: with VIZ=1, the folder of this process's stage viewer pages and their titles (viz.py); kept
      for the whole process, so that its index lists every page.
    - `recording`: while capture.py records a call of a step, what that call launched; None otherwise.
    - `memory`: plan -> its memory plan (uopc.lower.plan_memory: which intermediates share storage), and
      `scratch`: plan -> device -> that storage, allocated at the plan's first run and used by every later
      one (intermediates hold nothing between runs). Weak by plan, as `compiled` is. `share_memory` off
      gives every buffer its own new array at every run, as before memory planning (to compare).
    """

    def __init__(self) -> None:
        self.buffers: weakref.WeakKeyDictionary[UOp, Any] = weakref.WeakKeyDictionary()
        self.computed: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
        self.leaves: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
        self.plans = PlanCache()
        self.compiled: weakref.WeakKeyDictionary[Plan, dict[str, CompiledPlan]] = weakref.WeakKeyDictionary()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.kernels: dict[tuple[UOp, str], CompiledPlan] = {}
        self.custom_gradients: weakref.WeakKeyDictionary[UOp, CustomGradient] = weakref.WeakKeyDictionary()
        self.pages = StagePages()
        self.recording: Recording | None = None
        self.memory: weakref.WeakKeyDictionary[Plan, MemoryPlan] = weakref.WeakKeyDictionary()
        self.scratch: weakref.WeakKeyDictionary[Plan, dict[str, dict[int, Any]]] = weakref.WeakKeyDictionary()
        self.share_memory = True
        self._buffer_ids = itertools.count()

    def new_buffer(self, data: Any, dtype: DType) -> UOp:
        """A BUFFER node for a flat backend buffer; each call makes a distinct node."""
        u = UOp(Ops.BUFFER, dtype, (), BufferArg(next(self._buffer_ids), int(data.size)))
        self.buffers[u] = data
        return u

    def prepare(self, graph: UOp, opt: bool, backend: Backend, beam: int = 0) -> tuple[Plan, CompiledPlan, bool]:
        """The plan of a normalized graph compiled on `backend`, and whether it was compiled just now.

        A plan this process has not seen is looked for in the backend's plan store first (a warm start:
        nothing is made or compiled); a plan made here is kept in the store for the next process. With
        `opt`, each kernel gets the opts a search found for it on this machine where one was kept, and with
        a `beam`, those without one are searched (compile_plan): a searching process restores no plan,
        whose kernels may not have been searched, and the plan it keeps replaces the stored one."""
        pack = backend.packing()
        plan = self.plans.find(graph, opt, pack)
        key = plan_key(graph, opt, pack) if backend.store is not None and plan is None else None
        restored = restore_plan(graph, opt, backend, key, pack) if key is not None and not beam else None
        if restored is not None:
            plan, compiled = restored
            self.plans.add_restored(graph, opt, plan, pack)
            self.compiled[plan] = {backend.name: compiled}
            self._count(compiled)
            return plan, compiled, True
        if plan is None:
            plan, _ = self.plans.get(graph, opt, pack)
        on_device = self.compiled.setdefault(plan, {})
        if backend.name in on_device:
            return plan, on_device[backend.name], False
        if key is None and backend.store is not None:
            key = plan_key(graph, opt, pack)
        compiled = on_device[backend.name] = compile_plan(plan, backend, key, beam if opt else None)
        self._count(compiled)
        return plan, compiled, True

    def plan_arrays(self, plan: Plan, backend: Backend, inputs: list[Any]) -> list[Any]:
        """The arrays one run of `plan` uses: the inputs', a new one for each output (it outlives the run),
        and the intermediates' storage, shared as the plan's memory plan says and kept for its next run."""
        if not self.share_memory:
            return inputs + [backend.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :]]
        memory = self.memory.get(plan)
        if memory is None:
            memory = self.memory[plan] = plan_memory(plan)
        kept = self.scratch.setdefault(plan, {}).setdefault(backend.name, {})
        results = set(plan.outputs)
        arrays = list(inputs)
        for b in range(plan.n_inputs, len(plan.buffers)):
            spec, slot = plan.buffers[b], memory.slot[b]
            if b in results:
                arrays.append(backend.runtime.allocate(spec.dtype, spec.size))
                continue
            if slot not in kept:
                kept[slot] = backend.runtime.allocate(spec.dtype, spec.size)
            arrays.append(kept[slot])
        return arrays

    def wait_for_optimized_builds(self) -> None:
        """Wait until every optimized build still under way (a tiered build's `later`) has ended, so that the
        next run of each plan runs the optimized library: what a steady-state timing must measure. A build
        that failed is reported by that next run, which keeps the quick library."""
        compiled = [c for on_device in list(self.compiled.values()) for c in on_device.values()]
        pending = [c.binary.later for c in [*compiled, *self.kernels.values()] if c.binary.later is not None]
        concurrent.futures.wait(pending)

    def _count(self, compiled: CompiledPlan) -> None:
        for stage, seconds in vars(compiled.times).items():
            self.seconds[stage] += seconds


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


def beam_width() -> int:
    """BEAM=n: search each kernel's opts with a beam of width n where none were found on this machine before
    (uopc.lower's search.py); 0 or unset: use those found before, search none."""
    text = os.environ.get("BEAM", "0").strip() or "0"
    if not text.isdigit():
        raise TensorError(f"BEAM must be a beam width (0: no search), got {text!r}")
    return int(text)


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
    backend = get_backend(device)
    plan, compiled, new = realizer.prepare(graph, optimizer_on(), backend, beam_width())
    scheduled = time.perf_counter()
    planned = scheduled - start - (sum(vars(compiled.times).values()) if new else 0.0)  # compiling not counted
    realizer.seconds["schedule"] += planned
    if new and debug_level() >= 4:
        print(compiled.source.text)
    buffers = realizer.plan_arrays(plan, backend, [realizer.buffers[b] for b in inputs])
    running = time.perf_counter()
    page = viz_on() and new  # a page per plan: a plan compiled before would show the same stages again
    run_seconds: tuple[float, ...] = ()
    if debug_level() >= 2 or page:
        run_seconds = _run_each(plan, compiled, buffers)
    else:
        compiled.executable.run(buffers)
    ran = time.perf_counter()
    realizer.seconds["run"] += ran - running
    if debug_level() >= 1:
        print(
            f"realize: {len(plan.steps)} kernels, schedule {(scheduled - start) * 1e3:.1f} ms, "
            f"run {(ran - scheduled) * 1e3:.1f} ms"
        )
    if page:
        number = realizer.pages.next_number()
        realizer.pages.write(RealizeRecord(number, device, graph, plan, compiled, planned, run_seconds))
    outputs = [
        inputs[o] if o < plan.n_inputs else realizer.new_buffer(buffers[o], plan.buffers[o].dtype) for o in plan.outputs
    ]
    if realizer.recording is not None:
        realizer.recording.launches.append(Launch(device, plan, compiled, inputs, buffers, outputs))
    return outputs


def buffer_node(value: UOp) -> UOp | None:
    """The BUFFER node under a computed value (a BUFFER, or a BUFFER given its shape); None for a graph."""
    if value.op is Ops.BUFFER:
        return value
    return value.src[0] if value.op is Ops.RESHAPE and value.src[0].op is Ops.BUFFER else None
