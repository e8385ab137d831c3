"""The backend protocol: the three parts a backend supplies, and how backends are found.

compile_plan (pipeline.py) walks a plan down the stages of stages.py. The arrows that depend on the machine
are the backend's, and it supplies nothing else:

    LinearPrograms --Renderer.render--> Source --Compiler.compile--> Binary --Runtime.load--> Executable

A backend whose renderer and compiler can also pass the source in parts (PartsRenderer, PartsCompiler)
gets the programs one by one instead, as the driver makes them: its compiler builds the first parts while
later kernels are still being linearized, and the values are the same.

The runtime also owns the backend's memory: it allocates buffers and copies numpy arrays in and out. Each
part gets plain values and returns plain values; none of them calls back into lowering. A backend registers
a `Backend` of its three parts under the entry-point group `uopc.backends` (the C backend as `C`), so that
the Tensor library can choose one by name (`DEVICE=C`) without importing any backend.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from uopc.ir import DType, UopcError
from uopc.lower.opt import Opts
from uopc.lower.stages import Binary, Kernel, LinearProgram, Manifest, Source, Step


class Renderer(Protocol):
    """Linear programs to source text in the backend's language."""

    def render(self, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Source:
        """One source for all `programs` (a plan builds once), with whatever runs `steps` in order."""


class Compiler(Protocol):
    """Source to binary. Builds each source once: a cache keyed by the source and the compiler's settings."""

    def compile(self, source: Source) -> Binary:
        """The binary built from `source`, from the cache when it is there."""


@runtime_checkable
class PartsRenderer(Renderer, Protocol):
    """A renderer that can also hand out a plan's source in parts, as the programs arrive."""

    def render_parts(self, programs: Iterable[LinearProgram], steps: Sequence[Step]) -> Iterator[Source]:
        """`render`'s source in parts that compile apart, each yielded as soon as the programs it needs
        have arrived from `programs` (which the driver linearizes meanwhile)."""


@runtime_checkable
class PartsCompiler(Compiler, Protocol):
    """A compiler that can start building before the whole source is written (a PartsRenderer's parts)."""

    def compile_parts(self, parts: Iterable[Source]) -> Binary:
        """The binary of the source that `parts` make, as `compile` would build it; it takes every part."""


class Executable(Protocol):
    """A loaded binary, and the plan of calls it was built for."""

    def run(self, buffers: Sequence[Any]) -> None:
        """Run every step of the plan, in order, on the plan's buffers (indexed as the steps index them)."""

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        """Run program `index` alone on `buffers` (its parameters, in slot order)."""


class Runtime(Protocol):
    """The device's memory, and the loading of binaries. Buffers are whatever the device computes on."""

    def allocate(self, dtype: DType, size: int) -> Any:
        """A new buffer of `size` elements."""

    def from_numpy(self, array: Any) -> Any:
        """A buffer holding a copy of (or, where possible, sharing) a contiguous numpy array."""

    def to_numpy(self, buffer: Any) -> Any:
        """The buffer's contents as a flat numpy array."""

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> Executable:
        """The binary made from `programs` and `steps`, ready to run them."""


class PlanStore(Protocol):
    """Compiled plans kept between processes, by plan key (pipeline.plan_key), for a backend whose binaries
    hold everything a plan runs (the C backend's libraries do): a warm start restores a plan from its
    manifest and its binary, and makes, linearizes, renders and compiles nothing. The store adds the
    backend's own settings to the key (its code, its compiler and flags), so a change to them misses."""

    def keep(self, key: str, manifest: Manifest, binary: Binary) -> None:
        """Remember that the plan with this key runs as `manifest` says, from `binary`."""

    def find(self, key: str) -> tuple[Manifest, Binary] | None:
        """The manifest and binary kept under `key`, if both are still there and intact."""

    def load(self, binary: Binary, manifest: Manifest) -> Executable:
        """The binary loaded, ready to run the manifest's steps (no programs needed)."""


class OptsStore(Protocol):
    """Opts found by search (search.py), kept between processes by kernel key (search.kernel_key). The store
    adds the machine to the key (its CPU, its thread count, the compiler and its flags): a choice measured
    on one machine is not used on another."""

    def keep(self, key: str, opts: Opts) -> None:
        """Remember that the kernel with this key runs fastest here with `opts`."""

    def find(self, key: str) -> Opts | None:
        """The opts kept under `key` on this machine, if any."""


@dataclass(frozen=True)
class Backend:
    """A backend is its three parts, under a name, and optionally a plan store for warm starts. A backend
    whose device runs kernels differently from loops on a CPU brings its own arrow from a Kernel to its
    LinearProgram (a GPU maps loops onto threads); without one, the driver applies the kernel's opts and
    linearizes, once per distinct kernel. A backend that `packs_matmuls` gets plans in which large matmuls
    read copies of their operands packed for a CPU's caches, vector registers and its `threads` (pack.py); a GPU tiles
    matmuls its own way, through shared memory. A backend with an `opts_store` gets each kernel with the
    opts a search found for it on this machine (search.py), wherever one was kept."""

    name: str
    renderer: Renderer
    compiler: Compiler
    runtime: Runtime
    store: PlanStore | None = None
    linearize: Callable[[Kernel], LinearProgram] | None = None
    packs_matmuls: bool = False
    opts_store: OptsStore | None = None
    threads: Callable[[], int] = lambda: 1  # the CPU threads its parallel loops run on, read when a plan is made

    def packing(self) -> int:
        """make_plan's `pack` for this backend: the threads its packed matmuls run on, 0 where it packs none."""
        return self.threads() if self.packs_matmuls else 0


class BackendNotFound(UopcError, LookupError):
    """No backend is registered under the name asked for; says which are installed."""


@functools.cache
def get_backend(name: str) -> Backend:
    """The backend registered under `name` in the `uopc.backends` entry-point group."""
    found = {ep.name.upper(): ep for ep in entry_points(group="uopc.backends")}
    if name.upper() not in found:
        known = ", ".join(sorted(found)) or "none (install uopc-backend-c)"
        raise BackendNotFound(f"no backend named {name!r}; installed backends: {known}")
    backend = found[name.upper()].load()
    if not isinstance(backend, Backend):
        raise BackendNotFound(f"the entry point for backend {name!r} names {backend!r}, which is not a Backend")
    return backend
