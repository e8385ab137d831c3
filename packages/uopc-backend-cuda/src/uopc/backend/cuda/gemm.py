"""Matmuls on a GPU: tiles staged in shared memory, a register tile per thread, and tensor cores.

One thread per output reads a whole row of A and a whole column of B from global memory: every element
of A is read N times, every element of B M times. A block that computes a BM x BN tile of outputs can
instead copy the BM x BK slice of A and the BK x BN slice of B it needs next into shared memory once, all
its threads helping (a cooperative load), wait at a barrier, and then let each thread read its operands
from there; each element now comes from global memory N/BN (or M/BM) times. Each thread keeps a TM x TN
tile of outputs in registers, so that each value it reads from shared memory is used TN (or TM) times.

The tiles are double-buffered: iteration kt of the loop over K fills half kt % 2 of each shared array, so
the next iteration's stores go to the other half, and one barrier per iteration keeps the block in step
(a thread cannot overwrite a half until every thread has passed the barrier after it was last read).

All of it is a rewrite of the kernel's graph, like the CPU's upcast: the loads of A and B become loads from
shared memory behind a BARRIER, the shared memory is filled by STOREs, and the linearizer orders the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from uopc.backend.cuda.launch import GPUOpts, Grid, axis_of
from uopc.ir import AddrSpace, AxisType, BufferArg, Ops, UOp, dtypes, range_, simplify, sink, substitute


@dataclass(frozen=True)
class Matmul:
    """A kernel that stores f(sum over k of a * b): a depends on output axis m and not on n, b on n and
    not on m; any other output axes are batch axes. f is what the kernel does with the sum (a bias, an
    activation): the rest of the stored value."""

    store: UOp
    reduce: UOp
    m: UOp
    n: UOp
    k: UOp
    batch: tuple[UOp, ...]
    a: UOp
    b: UOp

    @property
    def sizes(self) -> tuple[int, int, int]:
        return self.m.src[0].arg, self.n.src[0].arg, self.k.src[0].arg


def _ranges_in(u: UOp) -> set[UOp]:
    return {x for x in u.toposort() if x.op is Ops.RANGE}


def find_matmul(ast: UOp) -> Matmul | None:
    """The kernel's matmul, if it is one: a single store of a single sum over one loop of a product."""
    stores = [u for u in ast.toposort() if u.op is Ops.STORE]
    reduces = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    if len(stores) != 1 or len(reduces) != 1 or reduces[0].arg is not Ops.ADD or len(reduces[0].src) != 2:
        return None
    red, k = reduces[0], reduces[0].src[1]
    if red.src[0].op is not Ops.MUL:
        return None
    x, y = red.src[0].src
    outputs = {r for r in _ranges_in(stores[0]) if r.arg.kind is AxisType.LOOP}
    only_x, only_y = (_ranges_in(x) - _ranges_in(y)) & outputs, (_ranges_in(y) - _ranges_in(x)) & outputs
    if len(only_x) != 1 or len(only_y) != 1 or k not in _ranges_in(x) or k not in _ranges_in(y):
        return None
    (m,), (n,) = only_x, only_y
    batch = tuple(sorted(outputs - {m, n}, key=axis_of))
    return Matmul(stores[0], red, m, n, k, batch, x, y)


def _shared(slot: int, dtype: UOp, size: int) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dtype.scalar_dtype.ptr(AddrSpace.SHARED), (), BufferArg(slot, size))


def _batch_index(mm: Matmul, grid: Grid) -> dict[UOp, UOp]:
    """The batch axes, flattened along the grid's z: one block per batch element and output tile."""
    if not mm.batch:
        return {}
    sizes = [r.src[0].arg for r in mm.batch]
    g = grid.group(math.prod(sizes), axis_of(mm.batch[0]), 2, mm.batch[0])
    assert g is not None
    out, stride = {}, math.prod(sizes)
    for r, size in zip(mm.batch, sizes, strict=True):
        stride //= size
        out[r] = simplify((g // stride) % size) if len(sizes) > 1 else g
    return out


Where = Callable[[UOp, UOp], dict[UOp, UOp]]  # a tile's (row, column) -> the operand's axes there


def stage(
    operand: UOp, tile: tuple[int, int], where: Where, slot: int, kt: UOp, tid: UOp, threads: int, copies: int = 2
) -> list[UOp]:
    """The stores that copy this iteration's tile of `operand` into shared array `slot`, every thread its
    share: element e of the tile is stored by thread e % threads, so consecutive threads store consecutive
    elements (next to each other in memory too when the tile's columns are the operand's contiguous axis).
    The array holds `copies` tiles, iteration kt using copy kt % copies; with one copy, the next iteration
    overwrites what other threads may still be reading (the emulator reports that race)."""
    height, width = tile
    smem = _shared(slot, operand, copies * height * width)
    half = (kt % copies) * (height * width) if kt.src[0].arg > 1 and copies > 1 else kt.const_like(0)
    stores = []
    for first in range(0, height * width, threads):
        e = tid + first
        value = substitute(operand, where(e // width, e % width))
        stores.append(smem.store(simplify(half + e), simplify(value)))
    return stores


def synced(stores: list[UOp], slot: int) -> UOp:
    """Shared array `slot` once every thread of the block has made all of `stores` (a barrier)."""
    smem = next(s.src[0] for s in stores if s.src[0].arg.slot == slot)
    return UOp(Ops.BARRIER, smem.dtype, (smem, *stores))


def tile_matmul(mm: Matmul, opts: GPUOpts, grid: Grid, copies: int = 2) -> UOp:
    """The matmul with BM x BN outputs per block, staged through shared memory in steps of BK, and a
    TM x TN register tile per thread (thread (tx, ty) owns rows ty + i*BM/TM and columns tx + j*BN/TN, so
    that neighbouring threads read neighbouring shared-memory words: no bank conflicts)."""
    (bm, bn, bk), (tm, tn) = opts.tile, opts.thread_tile
    (size_m, size_n, size_k), like = mm.sizes, mm.m
    threads_n, threads_m = bn // tn, bm // tm
    index = _batch_index(mm, grid)
    gn, gm = grid.group(size_n // bn, axis_of(mm.n), 0, like), grid.group(size_m // bm, axis_of(mm.m), 1, like)
    ln, lm = grid.local(threads_n, axis_of(mm.n), 0, like), grid.local(threads_m, axis_of(mm.m), 1, like)
    zero = like.const_like(0)
    gn, gm, ln, lm = (x if x is not None else zero for x in (gn, gm, ln, lm))
    tid = lm * threads_n + ln
    kt = range_(UOp.const(size_k // bk, like.scalar_dtype), axis_of(mm.k), AxisType.REDUCE)
    kk = range_(UOp.const(bk, like.scalar_dtype), axis_of(mm.k) + 1, AxisType.REDUCE)
    k_of = kt * bk if kt.src[0].arg > 1 else zero
    threads = threads_n * threads_m
    at_a: Where = lambda r, c: {mm.m: gm * bm + r, mm.k: k_of + c, **index}
    at_b: Where = lambda r, c: {mm.k: k_of + r, mm.n: gn * bn + c, **index}
    stores = stage(mm.a, (bm, bk), at_a, 0, kt, tid, threads, copies)
    stores += stage(mm.b, (bk, bn), at_b, 1, kt, tid, threads, copies)
    smem_a, smem_b = synced(stores, 0), synced(stores, 1)
    half_a = (kt % copies) * (bm * bk) if kt.src[0].arg > 1 and copies > 1 else zero
    half_b = (kt % copies) * (bk * bn) if kt.src[0].arg > 1 and copies > 1 else zero
    a = [smem_a.load(simplify(half_a + (lm + i * threads_m) * bk + kk)) for i in range(tm)]
    b = [smem_b.load(simplify(half_b + kk * bn + ln + j * threads_n)) for j in range(tn)]
    loops = [x for x in (kt, kk) if x.src[0].arg > 1]
    outputs = []
    for i in range(tm):
        for j in range(tn):
            product = UOp(Ops.MUL, mm.reduce.src[0].dtype, (a[i], b[j]))
            total = UOp(Ops.REDUCE, mm.reduce.dtype, (product, *loops), Ops.ADD) if loops else product
            where = {mm.m: gm * bm + lm + i * threads_m, mm.n: gn * bn + ln + j * threads_n, **index}
            outputs.append(substitute(substitute(mm.store, {mm.reduce: total}), where))
    return _finish(outputs, grid)


WARPS = (2, 2)  # a block of four warps, two along M and two along N


Places = list[tuple[UOp, UOp]]  # (row, column) of each value a lane holds


def fragment_rows_cols(group: UOp, quad: UOp) -> tuple[Places, Places, Places]:
    """Where each value a lane holds sits in the m16n8k16 tiles, as PTX documents it: (row, column) of its
    8 elements of A (16 x 16), its 4 of B (16 x 8), and its 4 of the product D (16 x 8). A lane is thread
    `quad` of group `group`: lanes 4g to 4g+3 form group g."""
    a = [(group + 8 * ((i // 2) % 2), quad * 2 + i % 2 + 8 * (i // 4)) for i in range(8)]
    b = [(quad * 2 + i % 2 + 8 * (i // 2), group) for i in range(4)]
    d = [(group + 8 * (i // 2), quad * 2 + i % 2) for i in range(4)]
    return a, b, d


def tile_matmul_tensor_cores(mm: Matmul, opts: GPUOpts, grid: Grid) -> UOp:
    """The shared-memory tiling of tile_matmul, with the multiply done by tensor cores: each warp of the block
    computes a (BM/2) x (BN/2) part of the tile as 16 x 8 pieces, each piece one mma.sync per 16 steps of K.
    The 32 lanes of a warp hold the operands and the result between them (fragments), in the layout of
    fragment_rows_cols; the instruction multiplies 16-bit floats exactly and adds in float32."""
    bm, bn, bk = opts.tile
    (size_m, size_n, size_k), like = mm.sizes, mm.m
    fm, fn = bm // WARPS[0] // 16, bn // WARPS[1] // 8
    threads = 32 * WARPS[0] * WARPS[1]
    index = _batch_index(mm, grid)
    zero = like.const_like(0)
    gn, gm = grid.group(size_n // bn, axis_of(mm.n), 0, like), grid.group(size_m // bm, axis_of(mm.m), 1, like)
    gn, gm = (x if x is not None else zero for x in (gn, gm))
    tid = grid.local(threads, axis_of(mm.n), 0, like)
    assert tid is not None
    warp, lane = tid // 32, tid % 32
    warp_m, warp_n, group, quad = warp // WARPS[1], warp % WARPS[1], lane // 4, lane % 4
    kt = range_(UOp.const(size_k // bk, like.scalar_dtype), axis_of(mm.k), AxisType.REDUCE)
    kk = range_(UOp.const(bk // 16, like.scalar_dtype), axis_of(mm.k) + 1, AxisType.REDUCE)
    k_of = kt * bk if kt.src[0].arg > 1 else zero
    stores = stage(mm.a, (bm, bk), lambda r, c: {mm.m: gm * bm + r, mm.k: k_of + c, **index}, 0, kt, tid, threads)
    stores += stage(mm.b, (bk, bn), lambda r, c: {mm.k: k_of + r, mm.n: gn * bn + c, **index}, 1, kt, tid, threads)
    smem_a, smem_b = synced(stores, 0), synced(stores, 1)
    half_a = (kt % 2) * (bm * bk) if kt.src[0].arg > 1 else zero
    half_b = (kt % 2) * (bk * bn) if kt.src[0].arg > 1 else zero
    k16 = kk * 16 if kk.src[0].arg > 1 else zero
    a_at, b_at, d_at = fragment_rows_cols(group, quad)
    row0, col0 = warp_m * (16 * fm), warp_n * (8 * fn)
    a = [[smem_a.load(simplify(half_a + (row0 + f * 16 + r) * bk + k16 + c)) for r, c in a_at] for f in range(fm)]
    b = [[smem_b.load(simplify(half_b + (k16 + r) * bn + col0 + f * 8 + c)) for r, c in b_at] for f in range(fn)]
    loops = [x for x in (kt, kk) if x.src[0].arg > 1]
    outputs = []
    for i in range(fm):
        for j in range(fn):
            for e, (r, c) in enumerate(d_at):
                piece = UOp(Ops.MMA, dtypes.float32, (*a[i], *b[j]), e)
                total = UOp(Ops.REDUCE, dtypes.float32, (piece, *loops), Ops.ADD) if loops else piece
                where = {mm.m: gm * bm + row0 + i * 16 + r, mm.n: gn * bn + col0 + j * 8 + c, **index}
                value = total.cast(mm.reduce.scalar_dtype)
                outputs.append(substitute(substitute(mm.store, {mm.reduce: value}), where))
    return _finish(outputs, grid)


def fits_tensor_cores(mm: Matmul, opts: GPUOpts) -> bool:
    bm, bn, bk = opts.tile
    size_m, size_n, size_k = mm.sizes
    half = mm.reduce.src[0].dtype in (dtypes.float16, dtypes.bfloat16)
    shape = bm % 32 == 0 and bn % 16 == 0 and bk % 16 == 0 and bm * bk % 128 == 0 and bk * bn % 128 == 0
    return half and shape and bm > 0 and bn > 0 and size_m % bm == 0 and size_n % bn == 0 and size_k % bk == 0


def _finish(stores: list[UOp], grid: Grid) -> UOp:
    gpu = grid.ordered()
    return simplify(sink(*(s.end(*gpu) if gpu else s for s in stores)))


def fits(mm: Matmul, opts: GPUOpts) -> bool:
    """Whether the tiles divide the matmul, and the threads divide the tiles' cooperative loads."""
    (bm, bn, bk), (tm, tn) = opts.tile, opts.thread_tile
    size_m, size_n, size_k = mm.sizes
    if min(bm, bn, bk, tm, tn) < 1 or size_m % bm or size_n % bn or size_k % bk or bm % tm or bn % tn:
        return False
    threads = (bm // tm) * (bn // tn)
    return threads <= 1024 and (bm * bk) % threads == 0 and (bk * bn) % threads == 0


TILES = [(64, 64, 16), (32, 32, 16), (32, 32, 8), (16, 16, 8), (16, 16, 4)]


TENSOR_CORE_TILES = [(64, 64, 16), (32, 32, 16)]


def choose_tile(mm: Matmul) -> GPUOpts | None:
    """The largest tile that divides the matmul, on tensor cores for 16-bit floats, else 4 x 4 outputs per
    thread; or None: then one thread per output. Shapes no tile divides are left to the plain mapping
    (tiles with ragged edges would need guards)."""
    for tile in TENSOR_CORE_TILES:
        opts = GPUOpts(tile=tile, tensor_cores=True)
        if fits_tensor_cores(mm, opts):
            return opts
    for tile in TILES:
        opts = GPUOpts(tile=tile, thread_tile=(4, 4))
        if fits(mm, opts):
            return opts
    return None
