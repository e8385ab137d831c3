"""The driver: a plan walked down the arrows to something that runs, on one backend.

    Plan --linearize (each kernel)--> LinearPrograms --render--> Source --compile--> Binary --load--> Executable

Each stage's value is kept, with the time its arrow took, for whoever wants to look: DEBUG=4 prints the
source, the benchmarks add up the times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from uopc.lower.backend import Backend, Executable
from uopc.lower.stages import Binary, LinearProgram, Plan, Source


@dataclass(frozen=True)
class StageTimes:
    """Seconds each arrow of compile_plan took, for the whole plan."""

    linearize: float
    render: float
    compile: float
    load: float


@dataclass(frozen=True)
class CompiledPlan:
    """A plan at every stage below it on one backend: its programs, their source, the binary, and the
    executable that runs the plan's steps; programs[i] is the plan's kernel i."""

    programs: tuple[LinearProgram, ...]
    source: Source
    binary: Binary
    executable: Executable
    times: StageTimes


def compile_plan(plan: Plan, backend: Backend) -> CompiledPlan:
    """Linearize every kernel of `plan` (as `backend` linearizes), then render, compile and load them with
    `backend`'s three parts."""
    start = time.perf_counter()
    programs = tuple(backend.linearize(k) for k in plan.kernels)
    linearized = time.perf_counter()
    source = backend.renderer.render(programs, plan.steps)
    rendered = time.perf_counter()
    binary = backend.compiler.compile(source)
    compiled = time.perf_counter()
    executable = backend.runtime.load(binary, programs, plan.steps)
    loaded = time.perf_counter()
    times = StageTimes(linearized - start, rendered - linearized, compiled - rendered, loaded - compiled)
    return CompiledPlan(programs, source, binary, executable, times)
