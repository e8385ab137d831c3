"""Opts: the knobs that reshape a kernel's loops without changing what it computes.

upcast an output axis by n: its loop runs n times fewer iterations and computes n outputs per iteration,
in registers (a register tile: an upcast matmul computes a tile of outputs that all share one reduce loop).
unroll a reduce axis by n: the reduce loop runs n times fewer iterations, each combining n values.
thread an output axis: its loop becomes the outermost one and runs in parallel across CPU threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uopc.ir import AxisType, Ops, UOp, accumulator_dtype, linear_terms, prod, range_, simplify, sink, substitute
from uopc.lower.rangeify import LowerError


@dataclass(frozen=True)
class Opts:
    """Which axes to upcast, unroll and thread. Axis numbers are those of the kernel's ranges:
    the output axes first (0, 1, ...), then the reduce axes."""

    upcast: dict[int, int] = field(default_factory=dict)  # output axis -> factor
    unroll: dict[int, int] = field(default_factory=dict)  # reduce axis -> factor
    thread: int | None = None  # output axis to run in parallel


def find_range(kernel: UOp, axis: int) -> UOp:
    for u in kernel.toposort():
        if u.op is Ops.RANGE and u.arg.axis == axis:
            return u
    axes = sorted(u.arg.axis for u in kernel.toposort() if u.op is Ops.RANGE)
    raise LowerError(f"opt: the kernel has no loop over axis {axis}; its axes are {axes}")


def _split(r: UOp, n: int, what: str) -> UOp:
    size = r.src[0].arg
    if n < 1 or size % n:
        raise LowerError(f"opt: cannot {what} axis {r.arg.axis} of size {size} by {n}; use a divisor of {size}")
    return range_(UOp.const(size // n, r.scalar_dtype), r.arg.axis, r.arg.kind)  # in the kernel's index type


def upcast(kernel: UOp, axis: int, n: int) -> UOp:
    """Compute n outputs along `axis` per iteration: every statement over that axis is copied n times."""
    r = find_range(kernel, axis)
    if r.arg.kind is AxisType.REDUCE:
        raise LowerError(f"opt: axis {axis} is a reduce axis; upcast takes output axes (use unroll)")
    outer = _split(r, n, "upcast")
    out = []
    for end in kernel.src:
        if end.op is not Ops.END or r not in end.src[1:]:
            out.append(end)
            continue
        ranges = [outer if x is r else x for x in end.src[1:]]
        ranges = [x for x in ranges if x.src[0].arg > 1] if outer.src[0].arg == 1 else ranges
        for k in range(n):
            stmt = substitute(end.src[0], {r: outer * n + k if outer.src[0].arg > 1 else UOp.const(k, r.scalar_dtype)})
            out.append(stmt.end(*ranges) if ranges else stmt)
    return simplify(sink(*out))


def unroll(kernel: UOp, axis: int, n: int) -> UOp:
    """Combine n values per iteration of reduce `axis`: the loop body is copied n times and chained."""
    r = find_range(kernel, axis)
    if r.arg.kind is not AxisType.REDUCE:
        raise LowerError(f"opt: axis {axis} is an output axis; unroll takes reduce axes (use upcast)")
    outer = _split(r, n, "unroll")
    new: dict[UOp, UOp] = {}
    for red in kernel.toposort():
        if red.op is Ops.REDUCE and r in red.src[1:]:
            index = outer * n if outer.src[0].arg > 1 else UOp.const(0, r.scalar_dtype)
            dtype = accumulator_dtype(red.arg, red.scalar_dtype)  # the chain adds as the accumulator would
            copies = [substitute(red.src[0], {r: index + k}).cast(dtype) for k in range(n)]
            value = copies[0]
            for c in copies[1:]:
                value = UOp(red.arg, dtype, (value, c))
            ranges = [outer if x is r else x for x in red.src[1:] if x is not r or outer.src[0].arg > 1]
            combined = UOp(Ops.REDUCE, dtype, (value, *ranges), red.arg) if ranges else value
            new[red] = combined.cast(red.scalar_dtype)
    return simplify(substitute(kernel, new))


def thread(kernel: UOp, axis: int) -> UOp:
    """Run the loop over output `axis` on all cores: it becomes the outermost loop, an OpenMP parallel for."""
    r = find_range(kernel, axis)
    if r.arg.kind is not AxisType.LOOP:
        raise LowerError(f"opt: only an output axis can be threaded, axis {axis} is {r.arg.kind.value}")
    par = range_(r.src[0], axis, AxisType.THREAD)
    out = []
    for end in kernel.src:
        if end.op is Ops.END and r in end.src[1:]:
            ranges = [par] + [x for x in end.src[1:] if x is not r]
            out.append(substitute(end.src[0], {r: par}).end(*ranges))
        else:
            out.append(end)
    return sink(*out)


THREAD_MIN_WORK = 1 << 18  # below this many inner iterations, starting threads costs more than it saves


def reduce_strides(kernel: UOp) -> list[bool]:
    """For each load a reduce loop drives, whether it strides: moves more than one element per iteration.

    A matmul x @ W.T reads both operands along the reduce axis (no stride); x @ W reads W across rows, a
    stride of its width; a weight gradient x.T @ dy strides through both. gcc vectorizes the first kind of
    reduce loop well and the others badly (notes 31), and the best register tile differs between them.
    """
    return [strided for _, strided in _reduce_loads(kernel)]


def strided_axes(kernel: UOp) -> frozenset[int]:
    """The reduce axes along which some load strides (see reduce_strides): a renderer's vectorization hint."""
    return frozenset(r.arg.axis for r, strided in _reduce_loads(kernel) if strided)


def _reduce_loads(kernel: UOp) -> list[tuple[UOp, bool]]:
    """(reduce range, whether the load strides along it), for each load and each reduce range that moves it."""
    reduces = {u for u in kernel.toposort() if u.op is Ops.RANGE and u.arg.kind in (AxisType.REDUCE, AxisType.UNROLL)}
    out = []
    for load in (u for u in kernel.toposort() if u.op is Ops.LOAD):
        terms, _ = linear_terms(load.src[1])
        for r in reduces:
            stride = terms.get(r, 0)
            hidden = any(r in t.toposort() for t in terms if t is not r)  # r inside a division or a product
            if stride or hidden:
                out.append((r, stride != 1 or hidden))
    return out


def choose_opts(kernel: UOp) -> Opts:
    """A simple default, measured on a few matmul layouts (notes 31): a register tile in reduce kernels, 8x8
    unless every load strides along the reduce (then 4x4), and threads for big work."""
    ranges = sorted((u for u in kernel.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg.axis)
    outputs = [r for r in ranges if r.arg.kind is AxisType.LOOP]
    work = prod(r.src[0].arg for r in ranges)
    upcast = {}
    if any(r.arg.kind is AxisType.REDUCE for r in ranges):
        strides = reduce_strides(kernel)
        factors = (4, 2) if strides and all(strides) else (8, 4, 2)
        for r in outputs[-2:]:
            n = next((f for f in factors if r.src[0].arg % f == 0 and r.src[0].arg > f), None)
            if n is not None:
                upcast[r.arg.axis] = n
    left = [r for r in outputs if r.src[0].arg // upcast.get(r.arg.axis, 1) > 1]
    threaded = left[0].arg.axis if left and work >= THREAD_MIN_WORK else None
    return Opts(upcast=upcast, thread=threaded)


MAX_UPCAST = 64  # values per register tile: gcc needed minutes for a 16x16 tile, and it spilled registers


def apply_opts(kernel: UOp, opts: Opts) -> UOp:
    """Unroll, then upcast, then thread; each step keeps the kernel's meaning."""
    tile = prod(opts.upcast.values())
    if tile > MAX_UPCAST:
        raise LowerError(f"opt: upcast {opts.upcast} makes a tile of {tile} values; at most {MAX_UPCAST} are allowed")
    for axis, n in sorted(opts.unroll.items()):
        kernel = unroll(kernel, axis, n)
    for axis, n in sorted(opts.upcast.items()):
        kernel = upcast(kernel, axis, n)
    if opts.thread is not None:
        kernel = thread(kernel, opts.thread)
    return kernel
