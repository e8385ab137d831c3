"""The C backend: kernels rendered as C, built in batches, run on numpy arrays."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from uopc.backend.c.program import ArgumentError, CParam, check_arrays, load_built, numpy_dtype
from uopc.backend.c.render import C_PRELUDE, RenderError, render_c, render_kernel
from uopc.ir import DType
from uopc.lower import Kernel, Step

# --8<-- [start:batch-source]
C_KEYWORDS = frozenset(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "bool",
        "true",
        "false",
    ]
)


def batch_source(kernels: Sequence[Kernel], steps: Sequence[Step]) -> str:
    """One C file: every kernel, each helper once, and `uopc_plan`, which calls the kernels in plan order."""
    names = [k.name for k in kernels]
    if len(set(names)) != len(names):
        raise RenderError(f"kernel names in one batch must be unique, got {names}")
    bad = [n for n in names if not n.isidentifier() or n in C_KEYWORDS or n == "uopc_plan"]
    if bad:
        raise RenderError(f"kernel names must be C identifiers that are not keywords or uopc_plan, got {bad}")
    helpers: dict[str, str] = {}
    functions = []
    for k in kernels:
        function, used = render_kernel(k)
        helpers.update(used)
        functions.append(function)
    calls = [f"  {kernels[s.kernel].name}({', '.join(f'bufs[{b}]' for b in s.buffers)});" for s in steps]
    plan = "\n".join(["void uopc_plan(void* const* bufs) {", *calls, "}"])
    return "\n\n".join([C_PRELUDE, *helpers.values(), *functions, plan]) + "\n"


# --8<-- [end:batch-source]


# --8<-- [start:plan-buffers]
def plan_buffers(kernels: Sequence[Kernel], steps: Sequence[Step]) -> dict[int, CParam]:
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


# --8<-- [end:plan-buffers]


class CExecutable:
    """A built batch: `run` calls the whole plan with one call into C; `run_kernel` calls one kernel."""

    def __init__(self, kernels: Sequence[Kernel], steps: Sequence[Step]) -> None:
        self.kernels, self.steps = list(kernels), list(steps)
        self.buffers = plan_buffers(kernels, steps)
        self.source = batch_source(kernels, steps)
        lib = load_built(self.source)
        self.plan = lib.uopc_plan
        self.plan.argtypes, self.plan.restype = [ctypes.c_void_p], None
        self.functions = []
        for k in kernels:
            fn = getattr(lib, k.name)
            fn.argtypes, fn.restype = [ctypes.c_void_p] * len(k.params), None
            self.functions.append(fn)
        self.params = [
            [CParam(p.name, p.dtype, p.size, p.slot not in k.written) for p in k.params] for k in self.kernels
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
        check_arrays(self.kernels[index].name, self.params[index], buffers)
        self.functions[index](*(b.ctypes.data for b in buffers))


class CBackend:
    """The backend registered as `C` in the `uopc.backends` entry-point group."""

    name = "C"

    def render(self, kernel: Kernel) -> str:
        return render_c(kernel)

    def compile(self, kernels: Sequence[Kernel], steps: Sequence[Step]) -> CExecutable:
        return CExecutable(kernels, steps)

    # --8<-- [start:c-buffers]
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

    # --8<-- [end:c-buffers]
