"""The driver: a plan walked down the arrows to something that runs, on one backend.

    Plan --linearize (each kernel)--> LinearPrograms --render--> Source --compile--> Binary --load--> Executable

Each stage's value is kept, with the time its arrow took, for whoever wants to look: DEBUG=4 prints the
source, the benchmarks add up the times.

A backend with a plan store keeps each compiled plan on disk under the plan's key (`plan_key`: a digest of
the graph, the optimizer setting and the lowering code), and `restore_plan` reads it back in a new process:
a warm start loads the binary and runs it from the plan's manifest, with no kernel made, linearized or
rendered. The stages it skipped are made again only if someone looks at them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import uopc.ir
from uopc.ir import UOp, to_uir
from uopc.lower.backend import Backend, Executable, PartsCompiler, PartsRenderer
from uopc.lower.kernelize import collector_paused, make_plan
from uopc.lower.linearize import linearize, linearize_optimized
from uopc.lower.opt import apply_opts
from uopc.lower.rangeify import LowerError
from uopc.lower.search import tuned_kernels
from uopc.lower.stages import Binary, Kernel, LinearProgram, Manifest, Plan, Source

T = TypeVar("T")


@dataclass(frozen=True)
class StageTimes:
    """Seconds each arrow of compile_plan took, for the whole plan (opts: applying the kernels' opts, the
    first half of linearize; search: finding the kernels' searched opts, and searching for them, search.py).
    A plan restored from a plan store spent only `compile` (finding its binary) and `load`."""

    opts: float
    linearize: float
    render: float
    compile: float
    load: float
    search: float = 0.0


@dataclass(frozen=True, eq=False)
class CompiledPlan:
    """A plan at every stage below it on one backend: its programs, their source, the binary, and the
    executable that runs the plan's steps; programs[i] is the plan's kernel i.

    The programs and the source come from `make_programs` and `make_source` the first time they are asked
    for: compile_plan has them, a plan restored from a plan store makes them again only for a reader."""

    binary: Binary
    executable: Executable
    times: StageTimes
    make_programs: Callable[[], tuple[LinearProgram, ...]] = field(repr=False)
    make_source: Callable[[tuple[LinearProgram, ...]], Source] = field(repr=False)

    @functools.cached_property
    def programs(self) -> tuple[LinearProgram, ...]:
        return self.make_programs()

    @functools.cached_property
    def source(self) -> Source:
        return self.make_source(self.programs)


@collector_paused()  # as make_plan, for the same reason
def compile_plan(plan: Plan, backend: Backend, key: str | None = None, beam: int | None = None) -> CompiledPlan:
    """Linearize every kernel of `plan` (as `backend` linearizes, if it brings its own arrow), then render,
    compile and load them with `backend`'s three parts; with a `key` (plan_key) and a backend that has a plan
    store, keep the result there for a warm start. A backend that takes its source in parts gets each
    program as soon as it is made, so that its compiler works while later kernels are linearized. With
    `beam` (0 or more), each kernel runs with the opts the backend's opts store keeps for it on this
    machine, and with a `beam` of 1 or more, a kernel that has none gets them by a search of that width
    (search.py); without it, with the opts the plan chose."""
    clock = _Clock("compile")
    kernels = plan.kernels
    if beam is not None and backend.linearize is None:  # a backend's own arrow chooses its own opts
        with clock.stage("search"):
            kernels = tuned_kernels(kernels, backend, beam, lowering_code())
    made: list[LinearProgram] = []
    programs = _linear_programs(kernels, backend, clock, made)
    renderer, compiler = backend.renderer, backend.compiler
    if isinstance(renderer, PartsRenderer) and isinstance(compiler, PartsCompiler):
        binary = compiler.compile_parts(_timed(renderer.render_parts(programs, plan.steps), "render", clock))
        if len(made) != len(plan.kernels):
            raise LowerError(f"backend {backend.name}'s compiler returned before it took every part of the source")
        source = None
    else:
        made_all = tuple(programs)
        with clock.stage("render"):
            source = renderer.render(made_all, plan.steps)
        binary = compiler.compile(source)
    if key is not None and backend.store is not None:
        backend.store.keep(key, plan.manifest, binary)
    done = tuple(made)
    with clock.stage("load"):
        executable = backend.runtime.load(binary, done, plan.steps)
    make_source = functools.partial(renderer.render, steps=plan.steps) if source is None else lambda _: source
    return CompiledPlan(binary, executable, clock.times(), lambda: done, make_source)


def _linear_programs(
    kernels: tuple[Kernel, ...], backend: Backend, clock: _Clock, made: list[LinearProgram]
) -> Iterator[LinearProgram]:
    """Each kernel's program, in plan order, also appended to `made`. Without a backend's own arrow, the
    opts are applied once per distinct graph and opts and the result linearized once: a model's repeated
    layers make the same kernels again (the GPT step's 159 kernels are 100 distinct ones), and nodes are
    hash-consed, so equal graphs are one object and the lookups are by identity; a repeat is only renamed.
    The opts of all the kernels share one simplify memo (apply_opts). The memos live as long as this walk
    over one plan."""
    optimized: dict[tuple[object, ...], UOp] = {}
    linear: dict[UOp, LinearProgram] = {}
    simplified: dict[UOp, UOp] = {}
    for k in kernels:
        if backend.linearize is not None:  # its arrow chooses and applies its opts as it linearizes
            with clock.stage("linearize"):
                program = backend.linearize(k)
        else:
            key = (k.ast, *k.opts.key())
            with clock.stage("opts"):
                if key not in optimized:
                    optimized[key] = apply_opts(k.ast, k.opts, simplified)
            ast = optimized[key]
            with clock.stage("linearize"):
                if ast not in linear:
                    linear[ast] = linearize_optimized(k, ast)
            first = linear[ast]
            program = first if first.name == k.name else dataclasses.replace(first, name=k.name)
        made.append(program)
        yield program


class _Clock:
    """Seconds by stage, for stages that take turns (a compiler pulls parts from a renderer, which pulls
    programs from the linearizer): the time between two readings goes to the innermost stage running."""

    def __init__(self, outer: str) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.running = [outer]
        self.last = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._read()
        self.running.append(name)
        try:
            yield
        finally:
            self._read()
            self.running.pop()

    def _read(self) -> None:
        now = time.perf_counter()
        self.seconds[self.running[-1]] += now - self.last
        self.last = now

    def times(self) -> StageTimes:
        self._read()
        return StageTimes(*(self.seconds[f.name] for f in dataclasses.fields(StageTimes)))


def _timed(items: Iterator[T], stage: str, clock: _Clock) -> Iterator[T]:
    """`items`, the time spent making each one counted to `stage`."""
    while True:
        with clock.stage(stage):
            item = next(items, None)
        if item is None:
            return
        yield item


@functools.cache
def lowering_code() -> str:
    """A digest of the source of uopc-ir and uopc-lower, which make a plan from a graph: part of every plan
    key, so that a changed compiler never restores a plan an older one made."""
    return code_digest([*uopc.ir.__path__, str(Path(__file__).parent)])


def code_digest(folders: list[str]) -> str:
    """A digest of every Python file in `folders`, by path and content."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.py")):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def plan_key(graph: UOp, opt: bool, pack: int = 0) -> str:
    """The name a plan store keeps the plan of a normalized graph under: a digest of the graph's text, the
    optimizer and packing settings and the lowering code. The backend adds its own settings (its code, its
    compiler)."""
    text = "\0".join([to_uir(graph), f"opt={opt}", f"pack={pack}", lowering_code()])
    return hashlib.sha256(text.encode()).hexdigest()


def restore_plan(graph: UOp, opt: bool, backend: Backend, key: str, pack: int) -> tuple[Plan, CompiledPlan] | None:
    """The plan of `graph`, compiled on `backend`, read back from the backend's plan store; None when the
    backend has no store or the store has no plan under `key` (plan_key of the same `opt` and `pack`). Nothing
    is made, linearized or rendered: the plan's kernels and the programs are made again only if someone asks
    for them."""
    if backend.store is None:
        return None
    start = time.perf_counter()
    found = backend.store.find(key)
    if found is None:
        return None
    manifest, binary = found
    looked_up = time.perf_counter()
    executable = backend.store.load(binary, manifest)
    loaded = time.perf_counter()
    plan = Plan(
        manifest.steps,
        manifest.buffers,
        manifest.n_inputs,
        manifest.outputs,
        make_kernels=lambda: _kernels_again(graph, opt, pack, manifest),
    )
    times = StageTimes(0.0, 0.0, 0.0, looked_up - start, loaded - looked_up)
    return plan, CompiledPlan(
        binary,
        executable,
        times,
        lambda: tuple(linearize(k) for k in _with_stored_opts(plan.kernels, opt, backend)),
        lambda programs: backend.renderer.render(programs, plan.steps),
    )


def _with_stored_opts(kernels: tuple[Kernel, ...], opt: bool, backend: Backend) -> tuple[Kernel, ...]:
    """The kernels of a restored plan with the opts its binary was built with: those the opts store keeps,
    where it keeps some, as compile_plan chose them (unless the plan was built before they were found)."""
    return tuned_kernels(kernels, backend, 0, lowering_code()) if opt else kernels


def _kernels_again(graph: UOp, opt: bool, pack: int, manifest: Manifest) -> tuple[Kernel, ...]:
    """The kernels of a restored plan, made again; they must be those the stored manifest describes."""
    plan = make_plan(graph, opt, pack)
    if plan.manifest != manifest:
        raise LowerError("a plan store's manifest does not match the plan its graph makes now: the store is stale")
    return plan.kernels
