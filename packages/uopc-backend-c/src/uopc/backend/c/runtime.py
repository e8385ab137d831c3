"""The C backend's runtime: numpy arrays as buffers, and a built plan loaded and run on them.

A plan's library holds every kernel and `uopc_plan`, which calls them in plan order, so running a whole
plan is one call into C. Every array is checked against what the kernels declare before C sees a pointer.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from uopc.backend.c.program import ArgumentError, CParam, check_arrays, load_binary, numpy_dtype
from uopc.backend.c.render import RenderError
from uopc.ir import DType
from uopc.lower import Binary, LinearProgram, Signature, Step


def plan_buffers(kernels: Sequence[Signature], steps: Sequence[Step]) -> dict[int, CParam]:
    """What each plan buffer the steps use must be: the dtype its kernels agree on, the largest size they use.

    A plan may hold buffers no kernel touches (an input whose every read was simplified away)."""
    dtype: dict[int, DType] = {}
    size: dict[int, int] = {}
    written: set[int] = set()
    for s in steps:
        k = kernels[s.kernel]
        if len(s.buffers) != len(k.params):
            raise RenderError(f"step calls {k.name} with {len(s.buffers)} buffers; it takes {len(k.params)}")
        for b, p in zip(s.buffers, k.params, strict=True):
            if dtype.setdefault(b, p.dtype) is not p.dtype:
                raise RenderError(f"plan buffer {b} is {dtype[b].name} in one kernel and {p.dtype.name} in {k.name}")
            size[b] = max(size.get(b, 0), p.size)
            if p.slot in k.written:
                written.add(b)
    return {b: CParam(f"buffer {b}", dtype[b], size[b], const=b not in written) for b in sorted(dtype)}


class CExecutable:
    """A loaded plan: `run` calls the whole plan with one call into C; `run_kernel` calls one kernel. It
    needs only the kernels' signatures, so a plan restored from the plan store loads without programs.

    Loaded from the quick tier of a tiered build, it holds the optimized build still under way (`later`)
    and, before each call, swaps that library in once it is done: the same functions, computing the same
    values, faster."""

    def __init__(
        self, lib: ctypes.CDLL, kernels: Sequence[Signature], steps: Sequence[Step], later: Future[Binary] | None = None
    ) -> None:
        self.kernels, self.steps, self.later = list(kernels), list(steps), later
        self.buffers = plan_buffers(kernels, steps)
        self.bind(lib)
        self.params = [
            [CParam(p.name, p.dtype, p.size, p.slot not in k.written) for p in k.params] for k in self.kernels
        ]
        self.n_buffers = max(self.buffers, default=-1) + 1
        self._pointers = ctypes.c_void_p * self.n_buffers

    def bind(self, lib: ctypes.CDLL) -> None:
        """Call the plan and the kernels in `lib` from now on."""
        self.plan = lib.uopc_plan
        self.plan.argtypes, self.plan.restype = [ctypes.c_void_p], None
        self.functions = []
        for k in self.kernels:
            fn = getattr(lib, k.name)
            fn.argtypes, fn.restype = [ctypes.c_void_p] * len(k.params), None
            self.functions.append(fn)

    def upgrade(self) -> None:
        """Swap in the optimized library if its build is done. If that build failed, the quick library,
        which computes the same values, keeps running, and a warning says why it stays slow."""
        if self.later is None or not self.later.done():
            return
        later, self.later = self.later, None
        error = later.exception()
        if error is not None:
            warnings.warn(f"kept the quickly built kernels: the optimized build failed: {error}", stacklevel=3)
            return
        self.bind(load_binary(later.result()))

    def run(self, buffers: Sequence[Any]) -> None:
        """Run the plan on `buffers`, indexed as the steps index them; entries no step uses are not touched."""
        self.upgrade()
        n = self.n_buffers
        if len(buffers) < n:
            raise ArgumentError(f"uopc_plan takes {n} buffers, got {len(buffers)}")
        check_arrays("uopc_plan", list(self.buffers.values()), [buffers[b] for b in self.buffers])
        self.plan(self._pointers(*(buffers[b].ctypes.data if b in self.buffers else None for b in range(n))))

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        self.upgrade()
        check_arrays(self.kernels[index].name, self.params[index], buffers)
        self.functions[index](*(b.ctypes.data for b in buffers))


class CRuntime:
    """The C backend's runtime: buffers are flat numpy arrays, binaries are shared libraries."""

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> CExecutable:
        return CExecutable(load_binary(binary), [p.signature for p in programs], steps, binary.later)

    # Buffers are flat numpy arrays. numpy has no bfloat16, so a bfloat16 buffer is a uint16 array holding
    # the bit patterns (numpy_dtype): from_numpy takes such an array as it is, and to_numpy returns it as it
    # is; the Tensor library converts to and from float32 with kernels (a cast), so no bit pattern is ever
    # made outside the C code that rounds.
    def allocate(self, dtype: DType, size: int) -> np.ndarray[Any, Any]:
        return np.empty(size, dtype=numpy_dtype(dtype))

    def from_numpy(self, array: Any) -> np.ndarray[Any, Any]:
        return np.array(array, order="C", copy=True).reshape(-1)

    def to_numpy(self, buffer: Any) -> np.ndarray[Any, Any]:
        return np.asarray(buffer)
