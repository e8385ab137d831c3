"""GPU mapping: a kernel's loops spread over the threads of a GPU, the lowering step of the GPU backends.

A C kernel is loops that one core (or a few) runs. A GPU runs a *grid* of *blocks*, each block a few hundred
threads, all running the same function; each thread finds out which element it computes by reading its
block's position in the grid (`blockIdx`) and its own position in the block (`threadIdx`). Mapping a kernel
onto a GPU replaces each output loop by those positions: loop `idx0` over 4096 elements becomes
`gidx0*256 + lidx0`, block `gidx0` of 16 and thread `lidx0` of 256. In the graph they are ranges of kind
GROUP and LOCAL, so the linearizer orders a GPU kernel exactly as it orders a C kernel, and the renderer
writes each of them as a read of `blockIdx`/`threadIdx` instead of a loop.

A reduction stays a loop inside each thread (a per-thread accumulator), unless the kernel has few outputs
and a long reduction: then the threads of a block share one output (a cooperative reduction), each summing
a strided part, and combine their partial sums with warp shuffles and a shared-memory exchange.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from uopc.ir import (
    AddrSpace,
    AxisType,
    BufferArg,
    DType,
    Ops,
    UOp,
    accumulator_dtype,
    dtypes,
    range_,
    round_to,
    simplify,
    sink,
    substitute,
)
from uopc.lower import Kernel, LinearProgram, LowerError, linear_order


# --8<-- [start:limits]
@dataclass(frozen=True)
class DeviceLimits:
    """What a CUDA device allows a launch (the same on every GPU since compute capability 3.0)."""

    max_threads: int = 1024  # threads per block
    max_block: tuple[int, int, int] = (1024, 1024, 64)  # threads along x, y, z
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)  # blocks along x, y, z
    warp: int = 32  # threads that run each instruction together, and can exchange registers
    max_shared_bytes: int = 48 * 1024  # static shared memory per block


LIMITS = DeviceLimits()
# --8<-- [end:limits]


# --8<-- [start:gpu-opts]
@dataclass(frozen=True)
class GPUOpts:
    """The knobs of the GPU mapping, chosen per kernel like the CPU's upcast and unroll.

    threads: how many threads a block aims for (each output axis gets a divisor of its size).
    reduce_threads: when above 0, the threads of one block share one output's reduction (cooperative).
    """

    threads: int = 256
    reduce_threads: int = 0


# --8<-- [end:gpu-opts]


# --8<-- [start:launch]
@dataclass(frozen=True)
class Launch:
    """How a GPU program is launched: blocks in the grid and threads in a block along x, y and z, and which
    GROUP or LOCAL range of the program reads which of `blockIdx` and `threadIdx` (by the range's axis)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dims: tuple[tuple[AxisType, int, str], ...]  # (kind, axis, "blockIdx.x") for each GPU range

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    def hardware(self, r: UOp) -> str:
        """What range `r` reads: blockIdx.x, threadIdx.y, ..."""
        return next(name for kind, axis, name in self.dims if (kind, axis) == (r.arg.kind, r.arg.axis))


@dataclass(frozen=True)
class GPUProgram(LinearProgram):
    """A linear program that runs on a GPU: the program of one thread, and how many threads run it."""

    launch: Launch


# --8<-- [end:launch]

GPU_KINDS = (AxisType.GROUP, AxisType.LOCAL)


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def _output_ranges(ast: UOp) -> list[UOp]:
    return sorted((u for u in ast.toposort() if u.op is Ops.RANGE and u.arg.kind is AxisType.LOOP), key=_axis)


def _axis(r: UOp) -> int:
    return int(r.arg.axis)


def top_reduces(ast: UOp) -> list[UOp]:
    """The REDUCEs not computed inside another REDUCE's value: those whose results reach the stores."""
    inner = {u for r in ast.toposort() if r.op is Ops.REDUCE for u in r.src[0].toposort() if u.op is Ops.REDUCE}
    return [u for u in ast.toposort() if u.op is Ops.REDUCE and u not in inner]


# --8<-- [start:choose-gpu-opts]
COOPERATIVE_MAX_OUTPUTS = 4096  # fewer outputs than this cannot keep a GPU busy with one thread each
COOPERATIVE_MIN_REDUCE = 64  # a shorter reduction is not worth the shuffles and the barrier


def choose_gpu_opts(ast: UOp) -> GPUOpts:
    """One thread per output, unless few outputs each reduce many values: then a block per output."""
    outputs = math.prod(r.src[0].arg for r in _output_ranges(ast))
    reduces = top_reduces(ast)
    longest = max((max(x.src[0].arg for x in r.src[1:]) for r in reduces), default=0)
    if reduces and outputs <= COOPERATIVE_MAX_OUTPUTS and longest >= COOPERATIVE_MIN_REDUCE:
        return GPUOpts(reduce_threads=min(256, 1 << (longest - 1).bit_length()))
    return GPUOpts()


# --8<-- [end:choose-gpu-opts]


class _Ranges:
    """Makes the GROUP and LOCAL ranges of a mapping and records which hardware index each one reads."""

    def __init__(self) -> None:
        self.grid, self.block = [1, 1, 1], [1, 1, 1]
        self.dims: list[tuple[AxisType, int, str]] = []
        self.made: list[UOp] = []

    def group(self, size: int, axis: int, dim: int, like: UOp) -> UOp | None:
        if size == 1:
            return None
        if size > LIMITS.max_grid[dim]:
            raise LowerError(f"GPU mapping: {size} blocks along {'xyz'[dim]} exceed the grid's {LIMITS.max_grid[dim]}")
        self.grid[dim] = size
        return self._make(size, axis, AxisType.GROUP, f"blockIdx.{'xyz'[dim]}", like)

    def local(self, size: int, axis: int, dim: int, like: UOp) -> UOp | None:
        if size == 1:
            return None
        self.block[dim] = size
        return self._make(size, axis, AxisType.LOCAL, f"threadIdx.{'xyz'[dim]}", like)

    def _make(self, size: int, axis: int, kind: AxisType, name: str, like: UOp) -> UOp:
        r = range_(UOp.const(size, like.scalar_dtype), axis, kind)
        self.dims.append((kind, axis, name))
        self.made.append(r)
        return r

    def launch(self) -> Launch:
        grid, block = self.grid, self.block
        return Launch((grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), tuple(self.dims))

    def ordered(self) -> list[UOp]:
        """Every GPU range, blocks before threads: the order in which each thread's program opens them."""
        return sorted(self.made, key=lambda r: (r.arg.kind is AxisType.LOCAL, _axis(r)))


def _spread(sizes: list[tuple[UOp, int]], dim: int, threads: int, ranges: _Ranges) -> dict[UOp, UOp]:
    """The loops `sizes` (range, size), flattened into one index spread over blocks and threads along `dim`."""
    first, total = sizes[0][0], math.prod(n for _, n in sizes)
    local = _largest_divisor(total, min(threads, LIMITS.max_block[dim]))
    g = ranges.group(total // local, _axis(first), dim, first)
    lr = ranges.local(local, _axis(first), dim, first)
    flat = first.const_like(0)
    if g is not None:
        flat = g * local if lr is not None else g
    if lr is not None:
        flat = flat + lr if g is not None else lr
    out, stride = {}, total
    for r, n in sizes:
        stride //= n
        out[r] = simplify((flat // stride) % n) if len(sizes) > 1 else flat
    return out


# --8<-- [start:map-outputs]
def map_outputs(outputs: list[UOp], opts: GPUOpts, ranges: _Ranges) -> dict[UOp, UOp]:
    """Each output loop as an index computed from blockIdx and threadIdx: the innermost axis along x (so that
    neighbouring threads touch neighbouring elements), the next along y, all others flattened along z.
    A block holds about `opts.threads` threads, a divisor of each axis, so that no thread is left over."""
    if not outputs:
        return {}
    groups = [[outputs[-1]], [outputs[-2]] if len(outputs) > 1 else [], outputs[:-2]]
    index: dict[UOp, UOp] = {}
    threads = opts.threads
    for dim, group in enumerate(groups):
        if group:
            index |= _spread([(r, r.src[0].arg) for r in group], dim, threads, ranges)
            threads //= ranges.block[dim]
    return index


# --8<-- [end:map-outputs]


def _rebuild_ends(ast: UOp, index: dict[UOp, UOp], ranges: _Ranges) -> UOp:
    """The kernel with its output loops replaced: each store now runs once per thread, inside the GPU ranges."""
    ends = []
    for end in ast.src:
        stmt = end.src[0] if end.op is Ops.END else end
        stmt = substitute(stmt, index)
        gpu = ranges.ordered()
        ends.append(stmt.end(*gpu) if gpu else stmt)
    return simplify(sink(*ends))


# --8<-- [start:cooperative]
def _identity(op: Ops, dtype: DType) -> UOp:
    value = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtype.min, Ops.MIN: dtype.max}[op]
    return UOp.const(round_to(dtype, value), dtype)


def _combine_dtype(dtype: DType) -> DType:
    """The type threads exchange partial results in: shuffles move 32- and 64-bit values."""
    if dtype.is_float:
        return dtypes.float64 if dtype is dtypes.float64 else dtypes.float32
    return dtype if dtype.itemsize >= 4 else dtypes.int32


def split_reduce(red: UOp, lane: UOp, threads: int) -> UOp:
    """The part of reduction `red` that thread `lane` of `threads` computes: its longest loop r becomes
    `r_outer*threads + lane` (neighbouring threads read neighbouring elements), and where that runs past the
    end, the thread contributes the reduction's identity and loads nothing."""
    value, loops = red.src[0], list(red.src[1:])
    r = max(loops, key=lambda x: (x.src[0].arg, _axis(x)))
    size = r.src[0].arg
    outer_size = -(-size // threads)
    outer = range_(UOp.const(outer_size, r.scalar_dtype), _axis(r), AxisType.REDUCE) if outer_size > 1 else None
    index = outer * threads + lane if outer is not None else lane
    valid = simplify(index < size)
    value = substitute(value, {r: index})
    if not (valid.op is Ops.CONST and valid.arg):
        gated = {
            u: UOp(Ops.LOAD, u.dtype, (u.src[0], u.src[1], valid if len(u.src) == 2 else u.src[2] & valid))
            for u in value.toposort()
            if u.op is Ops.LOAD and lane in u.toposort()
        }
        value = valid.where(substitute(value, gated), _identity(red.arg, red.scalar_dtype))
    acc = accumulator_dtype(red.arg, red.scalar_dtype)
    rest = [x for x in loops if x is not r] + ([outer] if outer is not None else [])
    value = simplify(value.cast(acc))
    return UOp(Ops.REDUCE, acc, (value, *rest), red.arg) if rest else value


def combine_in_block(partial: UOp, op: Ops, lane: UOp, threads: int, slot: int) -> UOp:
    """Every thread's `partial` combined with `op` over the `threads` threads of the block, in every thread.

    Within a warp, five shuffle steps (lanes 16, 8, 4, 2, 1 apart) leave each lane with its warp's result
    (a butterfly: lane i adds the value of lane i^k). Across warps, each thread stores its warp's result
    into shared memory, a barrier makes the stores visible, and every thread combines one value per warp."""
    dt = _combine_dtype(partial.scalar_dtype)
    v = partial.cast(dt)
    lane32 = lane.cast(dtypes.int32)
    k = min(threads, LIMITS.warp) // 2
    while k >= 1:
        v = UOp(op, dt, (v, UOp(Ops.SHUFFLE, dt, (v, lane32 ^ k))))
        k //= 2
    if threads > LIMITS.warp:
        smem = UOp(Ops.DEFINE_GLOBAL, dt.ptr(AddrSpace.SHARED), (), BufferArg(slot, threads))
        synced = UOp(Ops.BARRIER, smem.dtype, (smem, smem.store(lane, v)))
        warps = [synced.load(UOp.const(w * LIMITS.warp, lane.scalar_dtype)) for w in range(threads // LIMITS.warp)]
        v = warps[0]
        for w in warps[1:]:
            v = UOp(op, dt, (v, w))
    return v


def map_cooperative(ast: UOp, opts: GPUOpts, ranges: _Ranges) -> UOp:
    """One block per output, all output loops flattened along the grid's x; the block's threads share each
    reduction whose result reaches a store."""
    outputs, threads = _output_ranges(ast), opts.reduce_threads
    if threads % LIMITS.warp or not LIMITS.warp <= threads <= LIMITS.max_threads:
        raise LowerError(f"GPU mapping: a cooperative reduction takes whole warps, up to 1024 threads, not {threads}")
    index = _spread([(r, r.src[0].arg) for r in outputs], 0, 1, ranges) if outputs else {}
    reduces = top_reduces(ast)
    first = max(reduces[0].src[1:], key=lambda x: (x.src[0].arg, _axis(x)))
    lane = ranges.local(threads, _axis(first), 0, first)
    assert lane is not None
    combined = {}
    for slot, red in enumerate(reduces):
        partial = split_reduce(red, lane, threads)
        total = combine_in_block(partial, red.arg, lane, threads, slot)
        combined[red] = total.cast(red.scalar_dtype)
    return _rebuild_ends(substitute(ast, combined), index, ranges)


# --8<-- [end:cooperative]


# --8<-- [start:map-kernel]
def map_kernel(ast: UOp, opts: GPUOpts) -> tuple[UOp, Launch]:
    """The kernel with its loops mapped onto a GPU's blocks and threads, and how to launch it."""
    ranges = _Ranges()
    if opts.reduce_threads and top_reduces(ast):
        mapped = map_cooperative(ast, opts, ranges)
    else:
        mapped = _rebuild_ends(ast, map_outputs(_output_ranges(ast), opts, ranges), ranges)
    return mapped, ranges.launch()


def lower_gpu(kernel: Kernel, opts: GPUOpts | None = None) -> GPUProgram:
    """The GPU backends' arrow from a Kernel to its program: the kernel's loops mapped onto blocks and threads
    (with the GPU opts chosen for it, unless given; the CPU opts the plan chose do not apply), then linearized."""
    chosen = choose_gpu_opts(kernel.ast) if opts is None else opts
    mapped, launch = map_kernel(kernel.ast, chosen)
    uops = tuple(linear_order(mapped))
    return GPUProgram(kernel.name, kernel.params, kernel.written, uops, frozenset(), launch)


# --8<-- [end:map-kernel]
