"""The C backend's runtime: numpy arrays as buffers, and a built plan loaded and run on them.

A plan's library holds every kernel and `uopc_plan`, which calls them in plan order, so running a whole
plan is one call into C. Every array is checked against what the kernels declare before C sees a pointer.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from uopc.backend.c.program import ArgumentError, CParam, check_arrays, load_binary, numpy_dtype
from uopc.backend.c.render import RenderError
from uopc.ir import DType
from uopc.lower import Binary, LinearProgram, Step


def plan_buffers(programs: Sequence[LinearProgram], steps: Sequence[Step]) -> dict[int, CParam]:
    """What each plan buffer the steps use must be: the dtype its kernels agree on, the largest size they use.

    A plan may hold buffers no kernel touches (an input whose every read was simplified away)."""
    dtype: dict[int, DType] = {}
    size: dict[int, int] = {}
    written: set[int] = set()
    for s in steps:
        k = programs[s.kernel]
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
    """A loaded plan: `run` calls the whole plan with one call into C; `run_kernel` calls one kernel."""

    def __init__(self, lib: ctypes.CDLL, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> None:
        self.programs, self.steps = list(programs), list(steps)
        self.buffers = plan_buffers(programs, steps)
        self.plan = lib.uopc_plan
        self.plan.argtypes, self.plan.restype = [ctypes.c_void_p], None
        self.functions = []
        for k in programs:
            fn = getattr(lib, k.name)
            fn.argtypes, fn.restype = [ctypes.c_void_p] * len(k.params), None
            self.functions.append(fn)
        self.params = [
            [CParam(p.name, p.dtype, p.size, p.slot not in k.written) for p in k.params] for k in self.programs
        ]
        self.n_buffers = max(self.buffers, default=-1) + 1
        self._pointers = ctypes.c_void_p * self.n_buffers

    def run(self, buffers: Sequence[Any]) -> None:
        """Run the plan on `buffers`, indexed as the steps index them; entries no step uses are not touched."""
        n = self.n_buffers
        if len(buffers) < n:
            raise ArgumentError(f"uopc_plan takes {n} buffers, got {len(buffers)}")
        check_arrays("uopc_plan", list(self.buffers.values()), [buffers[b] for b in self.buffers])
        self.plan(self._pointers(*(buffers[b].ctypes.data if b in self.buffers else None for b in range(n))))

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        check_arrays(self.programs[index].name, self.params[index], buffers)
        self.functions[index](*(b.ctypes.data for b in buffers))


class CRuntime:
    """The C backend's runtime: buffers are flat numpy arrays, binaries are shared libraries."""

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> CExecutable:
        return CExecutable(load_binary(binary), programs, steps)

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
