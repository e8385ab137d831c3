"""The C backend's runtime: numpy arrays as buffers, and a built plan loaded and run on them.

A plan's library holds every kernel and `uopc_plan`, which calls them in plan order, so running a whole
plan is one call into C. Every array is checked against what the kernels declare before C sees a pointer:
once per binding (the list of arrays a plan runs on), since a captured step runs on nearly the same arrays
at every call, and checking all of them again was the largest cost of a replay outside its kernels.
"""

from __future__ import annotations

import ctypes
import functools
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from uopc.backend.c.openmp import on_master_core
from uopc.backend.c.program import ArgumentError, CParam, check_arrays, check_sharing, load_binary, numpy_dtype
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


def plan_spans(kernels: Sequence[Signature], steps: Sequence[Step]) -> dict[int, tuple[int, int]]:
    """For each plan buffer, the steps during which its memory must keep its value: from the step that first
    writes it to the last that uses it. A buffer some step reads before any writes it holds the caller's
    data, kept from before the first step (-1); one whose last use is a write is a result, kept until after
    the last (len(steps)). Buffers whose spans do not overlap may share memory."""
    first: dict[int, int] = {}
    last: dict[int, tuple[int, bool]] = {}
    for i, s in enumerate(steps):
        k = kernels[s.kernel]
        for b, p in zip(s.buffers, k.params, strict=True):
            writes = p.slot in k.written
            first.setdefault(b, i if writes else -1)
            last[b] = (i, writes)
    return {b: (first[b], len(steps) if wrote else i) for b, (i, wrote) in last.items()}


class Binding:
    """A list of arrays checked against a plan's buffers: each one's id, its memory (start and end address),
    and the pointers C gets for them. The arrays are held weakly: a binding must not keep memory alive."""

    def __init__(self, arrays: Sequence[Any], refs: list[weakref.ref[Any]], starts: Any, ends: Any, pointers: Any):
        self.ids = np.fromiter(map(id, arrays), np.uint64, len(arrays))
        self.refs, self.dtypes = refs, [a.dtype for a in arrays]
        self.starts, self.ends, self.pointers = starts, ends, pointers

    def changed(self, arrays: Sequence[Any], differ: Any, sizes: Sequence[int], written: Sequence[int]) -> list[int]:
        """Where `arrays` is not what was bound: at `differ`, another array (by id); elsewhere an array that
        has the id of a bound one that is gone, or a bound one changed in place since (its dtype or size, or
        made read-only where a kernel writes it)."""
        moved = set(differ.tolist())
        found = [
            i
            for i, (r, d, n, a) in enumerate(zip(self.refs, self.dtypes, sizes, arrays, strict=True))
            if i not in moved and (a.dtype is not d or a.size != n or r() is not a)
        ]
        moved.update(found)
        return sorted(moved) + [i for i in written if i not in moved and not arrays[i].flags.writeable]


BINDINGS_KEPT = 4
"""Bindings an executable remembers: a replay's two, and room for an eager call between replays."""


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
        spans = plan_spans(self.kernels, self.steps)
        self.spans = [spans[b] for b in self.buffers]
        self.sizes = [p.size for p in self.buffers.values()]
        self.written = [i for i, p in enumerate(self.buffers.values()) if not p.const]
        self.order = list(self.buffers)  # the plan buffer of each bound array
        where = {b: i for i, b in enumerate(self.order)}
        self.positions = [where.get(b) for b in range(self.n_buffers)]  # the bound array of each plan buffer
        self.bindings: list[Binding] = []

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
        on_master_core(functools.partial(self.plan, self.bind_buffers(buffers).pointers))

    def bind_buffers(self, buffers: Sequence[Any]) -> Binding:
        """The binding of these arrays. The same arrays as a binding kept from before are not checked again;
        where only a few differ (a captured step's new inputs, its state arrays taking turns), only those
        few are. A few bindings are kept, most recent last."""
        n = self.n_buffers
        if len(buffers) < n:
            raise ArgumentError(f"uopc_plan takes {n} buffers, got {len(buffers)}")
        arrays = [buffers[b] for b in self.buffers]
        ids = np.fromiter(map(id, arrays), np.uint64, len(arrays))
        base, differ = None, None
        for binding in reversed(self.bindings):
            found = np.flatnonzero(binding.ids != ids)
            if differ is None or len(found) < len(differ):
                base, differ = binding, found
        changed = base.changed(arrays, differ, self.sizes, self.written) if base is not None else []
        if base is not None and not changed:
            self.bindings.remove(base)
        else:
            base = self._bind(arrays, base if base is not None and len(changed) <= len(arrays) // 2 else None, changed)
            if len(self.bindings) >= BINDINGS_KEPT:
                del self.bindings[0]
        self.bindings.append(base)
        return base

    def _bind(self, arrays: list[Any], base: Binding | None, changed: list[int]) -> Binding:
        """Check `arrays` and bind them: all of them, or, given a binding they differ from only at
        `changed`, those arrays, against each other and against the rest."""
        params = list(self.buffers.values())
        if base is None:
            check_arrays("uopc_plan", params, arrays, self.spans)
            refs = [weakref.ref(a) for a in arrays]
            starts = np.array([a.ctypes.data for a in arrays], np.uint64)
            ends = starts + np.array([a.nbytes for a in arrays], np.uint64)
            pointers = self._pointers(*(None if i is None else int(starts[i]) for i in self.positions))
            return Binding(arrays, refs, starts, ends, pointers)
        new = [arrays[i] for i in changed]
        check_arrays("uopc_plan", [params[i] for i in changed], new, [self.spans[i] for i in changed])
        refs, starts, ends = list(base.refs), base.starts.copy(), base.ends.copy()
        pointers = self._pointers.from_buffer_copy(base.pointers)
        for i, a in zip(changed, new, strict=True):
            refs[i], starts[i], ends[i] = weakref.ref(a), a.ctypes.data, a.ctypes.data + a.nbytes
            pointers[self.order[i]] = a.ctypes.data
        moved = set(changed)
        for i in changed:
            for j in np.flatnonzero((starts < ends[i]) & (starts[i] < ends)).tolist():
                if j not in moved:
                    check_sharing("uopc_plan", params[i], params[j], (self.spans[i], self.spans[j]))
        return Binding(arrays, refs, starts, ends, pointers)

    def run_kernel(self, index: int, buffers: Sequence[Any]) -> None:
        self.upgrade()
        check_arrays(self.kernels[index].name, self.params[index], buffers)
        on_master_core(functools.partial(self.functions[index], *(b.ctypes.data for b in buffers)))


ALIGNMENT = 64  # bytes: a cache line, and one AVX-512 vector


def aligned_empty(dtype: np.dtype[Any], size: int) -> np.ndarray[Any, Any]:
    """An uninitialized flat array whose first element starts a cache line. numpy's large arrays start 16
    bytes into a page (malloc's header), so every 64-byte vector of a packed panel spanned two lines, and a
    load that splits across lines costs about two: aligned, the 1024 matmul's kernel ran 5-10% faster
    (scripts/bench_gemm.py --threads 1; notes 143)."""
    raw = np.empty(size * dtype.itemsize + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + size * dtype.itemsize].view(dtype)


class CRuntime:
    """The C backend's runtime: buffers are flat numpy arrays, binaries are shared libraries."""

    def load(self, binary: Binary, programs: Sequence[LinearProgram], steps: Sequence[Step]) -> CExecutable:
        return CExecutable(load_binary(binary), [p.signature for p in programs], steps, binary.later)

    # Buffers are flat numpy arrays. numpy has no bfloat16, so a bfloat16 buffer is a uint16 array holding
    # the bit patterns (numpy_dtype): from_numpy takes such an array as it is, and to_numpy returns it as it
    # is; the Tensor library converts to and from float32 with kernels (a cast), so no bit pattern is ever
    # made outside the C code that rounds.
    def allocate(self, dtype: DType, size: int) -> np.ndarray[Any, Any]:
        return aligned_empty(numpy_dtype(dtype), size)

    def from_numpy(self, array: Any) -> np.ndarray[Any, Any]:
        flat = np.asarray(array).reshape(-1)
        copy = aligned_empty(flat.dtype, flat.size)
        copy[...] = flat
        return copy

    def to_numpy(self, buffer: Any) -> np.ndarray[Any, Any]:
        return np.asarray(buffer)
