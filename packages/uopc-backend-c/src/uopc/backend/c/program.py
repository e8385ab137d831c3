"""Call compiled C on numpy arrays, checking every array against the function's parameters first.

A kernel's signature declares each buffer with its size, `float data0[restrict static 6]`, so the
checked entry point knows exactly what each parameter must be: a C-contiguous numpy array of that dtype
and that many elements (and writeable, unless the parameter is const). Anything else is refused with a
message, before C could read or write out of bounds.
"""

from __future__ import annotations

import ctypes
import functools
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uopc.backend.c import openmp
from uopc.backend.c.compiler import build_binary
from uopc.ir import DType, UopcError, dtypes
from uopc.lower import Binary


class ArgumentError(UopcError, TypeError):
    """An array that does not match the kernel parameter it is passed for."""


@dataclass(frozen=True)
class CParam:
    name: str
    dtype: DType
    size: int
    const: bool


def numpy_dtype(dtype: DType) -> np.dtype[Any]:
    """The numpy dtype of a buffer of `dtype`. numpy has no bfloat16: a bfloat16 buffer is a uint16 array of
    bit patterns, each the top half of the float32 with the same value (the C side stores exactly that)."""
    return np.dtype(np.uint16) if dtype is dtypes.bfloat16 else np.dtype(dtype.np_name)


_C_TYPES = {d.c_name: d for d in dtypes.all() if d is not dtypes.bfloat16}  # bfloat16 is declared as its bits
_PARAM = re.compile(r"^\s*(const\s+)?([a-zA-Z_][\w ]*?)\s+(\w+)\s*\[\s*restrict\s+static\s+(\d+)\s*\]\s*$")


def parse_signature(source: str, name: str) -> list[CParam]:
    """The parameters of function `name` in `source`; each must be declared `T data[restrict static N]`."""
    m = re.search(rf"\bvoid\s+{re.escape(name)}\s*\(([^)]*)\)\s*\{{", source)
    if m is None:
        raise ArgumentError(f"no function 'void {name}(...)' defined in the source")
    params = []
    for text in filter(None, (p.strip() for p in m.group(1).split(","))):
        pm = _PARAM.match(text)
        if pm is None or pm.group(2) not in _C_TYPES:
            raise ArgumentError(
                f"{name}: parameter '{text}' must be declared 'T name[restrict static N]' with a scalar type T, "
                "so that calls can be checked"
            )
        params.append(CParam(pm.group(3), _C_TYPES[pm.group(2)], int(pm.group(4)), pm.group(1) is not None))
    return params


def check_arrays(
    fn: str, params: Sequence[CParam], arrays: Sequence[Any], spans: Sequence[tuple[int, int]] | None = None
) -> None:
    """Raise ArgumentError unless each array matches its parameter exactly, and no array a kernel writes
    shares memory with another, unless `spans` (a plan's: the first and last step that uses each) say
    the two are never in use at the same time."""
    if len(arrays) != len(params):
        raise ArgumentError(f"{fn} takes {len(params)} arrays ({', '.join(p.name for p in params)}), got {len(arrays)}")
    for p, a in zip(params, arrays, strict=True):
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"{fn}: {p.name} must be a numpy array, got {type(a).__name__}")
        problem = None
        if a.dtype != numpy_dtype(p.dtype):
            problem = f"dtype {a.dtype}, expected {numpy_dtype(p.dtype)}"
            if p.dtype is dtypes.bfloat16:
                problem += " (the bit patterns of bfloat16 values)"
        elif a.size != p.size:
            problem = f"{a.size} elements (shape {a.shape}), expected {p.size}"
        elif not a.flags.c_contiguous:
            problem = "not C-contiguous; pass np.ascontiguousarray(...)"
        elif not p.const and not a.flags.writeable:
            problem = "read-only, but the kernel writes it"
        if problem:
            raise ArgumentError(f"{fn}: {p.name} is {problem}")
    _check_no_overlap(fn, params, arrays, spans)


def _check_no_overlap(
    fn: str, params: Sequence[CParam], arrays: Sequence[Any], spans: Sequence[tuple[int, int]] | None
) -> None:
    """Parameters are declared restrict: an array a kernel writes must share no memory with another one.

    The arrays are contiguous, so each is one address range; sorted by start, a range can only overlap the
    ones that start before it ends."""
    ranges = sorted((a.ctypes.data, a.ctypes.data + a.nbytes, i) for i, a in enumerate(arrays))
    for n, (_, end, i) in enumerate(ranges):
        for start, _, j in ranges[n + 1 :]:
            if start >= end:
                break
            check_sharing(fn, params[i], params[j], None if spans is None else (spans[i], spans[j]))


def check_sharing(fn: str, p: CParam, q: CParam, spans: tuple[tuple[int, int], tuple[int, int]] | None) -> None:
    """Raise ArgumentError: the arrays for p and q share memory, which is allowed only if neither is written,
    or if they are buffers of a plan whose `spans` (the steps that need each one's value) do not overlap: a
    memory plan made them share, no step sees both, and neither is written while the other's value is needed."""
    if p.const and q.const:
        return
    if spans is not None and (spans[0][1] < spans[1][0] or spans[1][1] < spans[0][0]):
        return
    written, other = (p, q) if not p.const else (q, p)
    used = f"; both are in use at once (steps {spans[0]} and {spans[1]})" if spans is not None else ""
    raise ArgumentError(
        f"{fn}: {written.name} shares memory with {other.name}, but the kernel writes {written.name}{used}"
    )


@functools.cache
def load_library(path: Path) -> ctypes.CDLL:
    return open_library(path)


def open_library(path: Path) -> ctypes.CDLL:
    """The library at `path`, loaded; if it is the first to need libgomp, libgomp starts with uopc's
    settings (openmp.starting_runtime)."""
    with openmp.starting_runtime():
        return ctypes.CDLL(str(path))


def load_binary(binary: Binary) -> ctypes.CDLL:
    """The library of `binary`, loaded. Another process's build can evict it from the cache between the
    build (or lookup) and this load, when the cache's limit is small: then a private copy of its bytes is
    loaded instead, and deleted once loaded (the process keeps its mapping)."""
    try:
        return load_library(binary.path)
    except OSError:
        if binary.path.exists():
            raise  # not evicted: the library itself does not load
    with tempfile.TemporaryDirectory(prefix="uopc-load-") as folder:  # made 0700: yours alone
        copy = Path(folder, binary.path.name)
        copy.write_bytes(binary.data)
        return open_library(copy)


class Program:
    """A C function built from source and callable on numpy arrays: `Program(src, "k")(a, b, out)`."""

    def __init__(self, source: str, name: str) -> None:
        self.name, self.params = name, parse_signature(source, name)
        self.fn = getattr(load_binary(build_binary(source)), name)
        self.fn.restype = None
        self.fn.argtypes = [ctypes.c_void_p] * len(self.params)

    def __call__(self, *arrays: Any) -> None:
        check_arrays(self.name, self.params, arrays)
        openmp.on_master_core(functools.partial(self.fn, *(a.ctypes.data for a in arrays)))
