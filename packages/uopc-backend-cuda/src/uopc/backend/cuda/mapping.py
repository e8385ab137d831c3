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

from uopc.backend.cuda.gemm import (
    choose_tile,
    find_matmul,
    fits,
    fits_tensor_cores,
    tile_matmul,
    tile_matmul_tensor_cores,
)
from uopc.backend.cuda.launch import LIMITS, GPUOpts, GPUProgram, Grid, Launch, axis_of
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
from uopc.lower import Kernel, LowerError, linear_order


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def _output_ranges(ast: UOp) -> list[UOp]:
    return sorted((u for u in ast.toposort() if u.op is Ops.RANGE and u.arg.kind is AxisType.LOOP), key=axis_of)


def top_reduces(ast: UOp) -> list[UOp]:
    """The REDUCEs not computed inside another REDUCE's value: those whose results reach the stores."""
    inner = {u for r in ast.toposort() if r.op is Ops.REDUCE for u in r.src[0].toposort() if u.op is Ops.REDUCE}
    return [u for u in ast.toposort() if u.op is Ops.REDUCE and u not in inner]


COOPERATIVE_MAX_OUTPUTS = 4096  # fewer outputs than this cannot keep a GPU busy with one thread each
COOPERATIVE_MIN_REDUCE = 64  # a shorter reduction is not worth the shuffles and the barrier


def choose_gpu_opts(ast: UOp) -> GPUOpts:
    """A matmul whose shape a tile divides is tiled in shared memory; otherwise one thread per output,
    unless few outputs each reduce many values: then a block per output."""
    mm = find_matmul(ast)
    tiled = choose_tile(mm) if mm is not None else None
    if tiled is not None:
        return tiled
    outputs = math.prod(r.src[0].arg for r in _output_ranges(ast))
    reduces = top_reduces(ast)
    longest = max((max(x.src[0].arg for x in r.src[1:]) for r in reduces), default=0)
    if reduces and outputs <= COOPERATIVE_MAX_OUTPUTS and longest >= COOPERATIVE_MIN_REDUCE:
        return GPUOpts(reduce_threads=min(256, 1 << (longest - 1).bit_length()))
    return GPUOpts()


def _spread(sizes: list[tuple[UOp, int]], dim: int, threads: int, ranges: Grid) -> dict[UOp, UOp]:
    """The loops `sizes` (range, size), flattened into one index spread over blocks and threads along `dim`."""
    first, total = sizes[0][0], math.prod(n for _, n in sizes)
    local = _largest_divisor(total, min(threads, LIMITS.max_block[dim]))
    g = ranges.group(total // local, axis_of(first), dim, first)
    lr = ranges.local(local, axis_of(first), dim, first)
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


def map_outputs(outputs: list[UOp], opts: GPUOpts, ranges: Grid) -> dict[UOp, UOp]:
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


def _rebuild_ends(ast: UOp, index: dict[UOp, UOp], ranges: Grid) -> UOp:
    """The kernel with its output loops replaced: each store now runs once per thread, inside the GPU ranges."""
    ends = []
    for end in ast.src:
        stmt = end.src[0] if end.op is Ops.END else end
        stmt = substitute(stmt, index)
        gpu = ranges.ordered()
        ends.append(stmt.end(*gpu) if gpu else stmt)
    return simplify(sink(*ends))


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
    r = max(loops, key=lambda x: (x.src[0].arg, axis_of(x)))
    size = r.src[0].arg
    outer_size = -(-size // threads)
    outer = range_(UOp.const(outer_size, r.scalar_dtype), axis_of(r), AxisType.REDUCE) if outer_size > 1 else None
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


def map_cooperative(ast: UOp, opts: GPUOpts, ranges: Grid) -> UOp:
    """One block per output, all output loops flattened along the grid's x; the block's threads share each
    reduction whose result reaches a store."""
    outputs, threads = _output_ranges(ast), opts.reduce_threads
    if threads % LIMITS.warp or not LIMITS.warp <= threads <= LIMITS.max_threads:
        raise LowerError(f"GPU mapping: a cooperative reduction takes whole warps, up to 1024 threads, not {threads}")
    index = _spread([(r, r.src[0].arg) for r in outputs], 0, 1, ranges) if outputs else {}
    reduces = top_reduces(ast)
    first = max(reduces[0].src[1:], key=lambda x: (x.src[0].arg, axis_of(x)))
    lane = ranges.local(threads, axis_of(first), 0, first)
    assert lane is not None
    combined = {}
    for slot, red in enumerate(reduces):
        partial = split_reduce(red, lane, threads)
        total = combine_in_block(partial, red.arg, lane, threads, slot)
        combined[red] = total.cast(red.scalar_dtype)
    return _rebuild_ends(substitute(ast, combined), index, ranges)


def map_kernel(ast: UOp, opts: GPUOpts) -> tuple[UOp, Launch]:
    """The kernel with its loops mapped onto a GPU's blocks and threads, and how to launch it."""
    ranges = Grid()
    mm = find_matmul(ast) if opts.tile != (0, 0, 0) else None
    fitting = fits_tensor_cores if opts.tensor_cores else fits
    if opts.tile != (0, 0, 0) and (mm is None or not fitting(mm, opts)):
        how = "on tensor cores" if opts.tensor_cores else f"with {opts.thread_tile} outputs per thread"
        raise LowerError(f"GPU mapping: tile {opts.tile} {how} does not fit this kernel")
    if mm is not None:
        mapped = (tile_matmul_tensor_cores if opts.tensor_cores else tile_matmul)(mm, opts, ranges)
    elif opts.reduce_threads and top_reduces(ast):
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
