"""The backend protocol: what uopc asks of a backend, and how backends are found.

A backend renders kernels as source, builds a batch of them at once, and runs them on its buffers. It
registers a class under the entry-point group `uopc.backends` (the C backend as `C`), so that the Tensor
library can choose one by name (`DEVICE=C`) without importing any backend.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol

from uopc.ir import DType, Ops, UOp, UopcError
from uopc.lower.linearize import linearize
from uopc.lower.rangeify import LowerError


# --8<-- [start:params]
@dataclass(frozen=True)
class Param:
    """One buffer parameter of a kernel. Kernels name their parameters data0, data1, ... by slot."""

    slot: int
    dtype: DType
    size: int

    @property
    def name(self) -> str:
        return f"data{self.slot}"


def kernel_params(kernel: UOp) -> tuple[Param, ...]:
    """The buffers a kernel reads or writes, in slot order; the slots are its argument positions."""
    found = {
        u.arg.slot: Param(u.arg.slot, u.scalar_dtype, u.arg.size)
        for u in kernel.toposort()
        if u.op is Ops.DEFINE_GLOBAL
    }
    if sorted(found) != list(range(len(found))):
        raise LowerError(f"kernel parameters must be numbered 0..n-1 with no gap, got slots {sorted(found)}")
    return tuple(found[s] for s in sorted(found))


# --8<-- [end:params]


# --8<-- [start:kernel]
@dataclass(frozen=True)
class Kernel:
    """A kernel ready for a backend: its name, its graph, its parameters and its linearized program."""

    name: str
    ast: UOp

    @functools.cached_property
    def params(self) -> tuple[Param, ...]:
        return kernel_params(self.ast)

    @functools.cached_property
    def program(self) -> list[UOp]:
        return linearize(self.ast)

    @functools.cached_property
    def flops(self) -> int:
        """Floating-point operations per run: each float ALU op or accumulation, times its loops' trip counts."""
        trips, total = [1], 0
        for u in self.program:
            if u.op is Ops.RANGE:
                trips.append(trips[-1] * u.src[0].arg)
            elif u.op is Ops.ENDRANGE:
                trips.pop()
            elif (u.op in Ops.ALU or u.op is Ops.ACCUMULATE) and u.scalar_dtype.is_float:
                total += trips[-1]
        return total

    @functools.cached_property
    def written(self) -> frozenset[int]:
        """The slots this kernel stores into."""
        return frozenset(u.src[0].arg.slot for u in self.ast.toposort() if u.op is Ops.STORE)


# --8<-- [end:kernel]


@dataclass(frozen=True)
class Step:
    """One kernel call of a plan: which kernel, and which of the plan's buffers fills each parameter."""

    kernel: int
    buffers: tuple[int, ...]


class Executable(Protocol):
    """A batch of built kernels, and the plan of calls they were built for."""

    def run(self, buffers: Sequence[Any]) -> None:
        """Run every step of the plan, in order, in one call into the backend."""

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        """Run kernel `index` alone on `buffers` (its parameters, in slot order)."""


# --8<-- [start:backend-protocol]
class Backend(Protocol):
    """What a backend provides. Buffers are whatever the backend computes on (numpy arrays for C)."""

    name: str

    def render(self, kernel: Kernel) -> str:
        """The kernel's source code."""

    def compile(self, kernels: Sequence[Kernel], steps: Sequence[Step]) -> Executable:
        """Build all kernels at once, with a runner that calls them in the order of `steps`."""

    def allocate(self, dtype: DType, size: int) -> Any:
        """A new buffer of `size` elements."""

    def from_numpy(self, array: Any) -> Any:
        """A buffer holding a copy of (or, where possible, sharing) a contiguous numpy array."""

    def to_numpy(self, buffer: Any) -> Any:
        """The buffer's contents as a flat numpy array."""


# --8<-- [end:backend-protocol]


class BackendNotFound(UopcError, LookupError):
    """No backend is registered under the name asked for; says which are installed."""


@functools.cache
def get_backend(name: str) -> Backend:
    """The backend registered under `name` in the `uopc.backends` entry-point group."""
    found = {ep.name.upper(): ep for ep in entry_points(group="uopc.backends")}
    if name.upper() not in found:
        known = ", ".join(sorted(found)) or "none (install uopc-backend-c)"
        raise BackendNotFound(f"no backend named {name!r}; installed backends: {known}")
    backend: Backend = found[name.upper()].load()()
    return backend
