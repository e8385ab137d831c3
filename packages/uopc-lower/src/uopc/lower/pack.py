"""Packing: a matmul's B copied into the order its register tile reads it, by a kernel the plan runs first.

A matmul kernel C[i, j] = sum over k of A[i, k] * B[k, j] reads, for each k, a row of w of B's columns into
its register tile (w = 32 or 48, panel_width). Where B is stored as (k, n), those rows lie n floats apart;
where a layer stores it transposed, (n, k), each column is k floats from the next, and a tile's loads are w
scattered floats. The packing copy writes B once into panels, panel p holding columns wp .. wp+w-1 for
k = 0, 1, ...: the tile's reduce loop then walks one contiguous block of memory, the same for every layout,
and the copy (n k floats, against m n k multiply-adds) absorbs the layout. The packed matmul's loops put the
panel outermost: a panel (w k floats, 128 KiB for w = 32 at k = 1024) stays in the core's L2 cache while
every row of A passes over it, which is the cache blocking. Where the reduce loop strides through A (A stored
as (k, m), as in a weight's gradient x.T @ dy), A is packed the same way, into groups of the tile's eight
rows, and each thread takes its own share of the groups and walks every panel over it (share_groups);
stored as (m, k), A is read as it is (packs_rows), and the threads share out the panels.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from uopc.ir import AxisType, Ops, UOp, dtypes, linear_terms, prod, range_, simplify, sink, substitute
from uopc.lower.opt import VECTOR_LANES, Opts, can_vectorize, choose_opts

# columns of B per panel, one register tile's width, widest first: 3 vectors of 16 floats (a tile of 8 x 48,
# 24 accumulators, loads 3 vectors and 8 floats for 24 FMAs) or 2 (8 x 32: 2 vectors and 8 floats for 16)
PANELS = (48, 32)
# how much faster the 8 x 48 tile multiplies than the 8 x 32 one, measured with AVX-512's 32 vector registers
# (VECTOR_LANES assumes them) in a C harness of 1344 x 1024 x 1344 on two threads, where both tiles divide the
# shape (11%); in uopc's plans at 1024, 4-6% with the padding of the last panel (notes 156)
WIDE_TILE_GAIN = 1.1
# rows of A per register tile: 8 x 2 (or 3) vector accumulators. Each step of k loads B's 2 vectors and 8
# floats of A for 16 FMAs; a 4 x 64 tile (4 x 4 accumulators) loads 4 vectors for as many, twice B's traffic from L2:
# 1024 and 512, one thread, CPU time, numpy in the same rounds: 0.83-0.87x numpy against 0.72-0.75x (chapter 13)
TILE_ROWS = 8
# multiply-adds (m n k) from which a matmul is packed: 128^3. bench_gemm.py --compare-unpacked, all three
# layouts, on a loaded 2-core machine: packed ran 0.9-1.05x the unpacked plan's speed at 64^3, 1.2x and more
# at 128^3, 2.6-4.2x at 256^3
PACK_MIN_WORK = 1 << 21
# steps of k ahead at which the matmul asks for B's panel: each step reads one row of the panel, a cache line
# per vector, and the hardware's prefetchers alone left the tile waiting on the core's L2. A C harness of
# uopc's 1024 kernels, two threads, in turns with the unhinted kernel: A @ B 3-4% faster at 8, 16 or 32
# steps ahead; A.T @ B 3-5% at 8 (notes 164)
PREFETCH_STEPS = 8
COPY_ROWS = 8  # rows of k a packing copy writes to one block before the next, where a row is short (pack_kernel)
LINE_FLOATS = 16  # float32s in a 64-byte cache line


@dataclass(frozen=True)
class Packable:
    """An operand's load in a matmul kernel, the output range it moves along (j for B, i for A) and the
    reduce range k; `width` elements of that range are packed next to each other for each k."""

    load: UOp
    column: UOp
    reduce: UOp
    width: int

    @property
    def blocks(self) -> tuple[int, int, int]:
        """The packed copy's shape: blocks (B's panels, A's groups of rows), k rows in each, `width` wide.
        Where the range is no multiple of the width, the last block is padded with zeros past its end."""
        return (-(-self.column.src[0].arg // self.width), self.reduce.src[0].arg, self.width)

    @property
    def size(self) -> int:
        return prod(self.blocks)

    @property
    def along_k(self) -> bool:
        """Whether the operand lies along k in memory: its load moves one element per step of k."""
        return linear_terms(self.load.src[1])[0].get(self.reduce) == 1


@dataclass(frozen=True)
class PackedMatmul:
    """What packing makes of a matmul kernel: the copies to run before it (B's, then A's if A is packed), the
    kernel reading the copies in the operands' slots, and its opts."""

    copies: tuple[Packable, ...]
    kernel: UOp
    opts: Opts


def pack_matmul(kernel: UOp, threads: int = 1) -> PackedMatmul | None:
    """Pack B into panels read as vectors, as wide as panel_width says for `threads`; pack A too into
    groups of the tile's rows where packs_rows says so; None where the kernel is no large float32 matmul
    whose panels vector lanes can read."""
    kernel = merge_reduce_ranges(kernel)
    b = find_packable(kernel, threads)
    if b is None:
        return None
    packed, columns = split_range(kernel, b, outermost=True)
    if not can_vectorize(packed, columns, VECTOR_LANES):  # its lanes must compute alike (no max of a fused relu, say)
        return None
    panels = b.column.arg.axis
    outputs = {u.arg.axis: u for u in packed.toposort() if u.op is Ops.RANGE and u.arg.kind is AxisType.LOOP}
    before = [a for a in outputs if a < panels]
    rows = outputs[max(before)] if before else None  # the output axis before B's columns: A's rows
    upcast, copies, thread = {columns: b.width // VECTOR_LANES}, [b], None
    if rows is not None and rows.src[0].arg % TILE_ROWS == 0:
        a = find_rows(packed, rows, b.reduce)
        if a is None or not packs_rows(a):
            upcast[rows.arg.axis] = TILE_ROWS
        else:
            packed, inner_rows = split_range(packed, a, outermost=False)
            upcast[inner_rows], copies = TILE_ROWS, [b, a]
            if threads > 1 and a.blocks[0] % threads == 0:
                packed, thread = share_groups(packed, rows.arg.axis, threads)
    if thread is None:
        trips = {panels: b.blocks[0]}  # the loops left after the upcast, by axis
        if rows is not None:
            trips[rows.arg.axis] = rows.src[0].arg // upcast.get(rows.arg.axis, 1)
        # threads over the panels where there are enough for each thread to have its own, else over the rows
        order = [panels] if b.blocks[0] >= 4 or rows is None else [rows.arg.axis, panels]
        thread = next((a for a in order if trips.get(a, 0) > 1), None)
    return PackedMatmul(tuple(copies), packed, Opts(upcast=upcast, vector=(columns, VECTOR_LANES), thread=thread))


def share_groups(kernel: UOp, groups: int, threads: int) -> tuple[UOp, int]:
    """The packed matmul with its loop over A's groups of rows (axis `groups`, g trips) split in two: a loop
    of `threads` shares (a new axis, returned, to be threaded) and, where the groups loop was, a loop over
    the g / threads groups of a share. Each thread then walks every panel of B over its own share of packed
    A, rather than over all of A for its share of the panels: the same multiply-adds and as many bytes of
    A, but a working set of A / threads, which at 1024 is 2 MiB, the L2 cache of one core of these
    machines. A.T @ B on two threads, both plans in turns with numpy: 4-6% faster at 1024 (three runs), 6%
    at 2048 and level at 256 (one run); with A stored (m, k) and read unpacked, the same split made A @ B
    2-5% slower (notes 159)."""
    end = kernel.src[0]
    loop = next(r for r in end.src[1:] if r.arg.axis == groups)
    axis = 1 + max(u.arg.axis for u in kernel.toposort() if u.op is Ops.RANGE)
    per_share = loop.src[0].arg // threads
    share = range_(UOp.const(threads, loop.scalar_dtype), axis)
    inner = range_(UOp.const(per_share, loop.scalar_dtype), groups)
    body = substitute(end.src[0], {loop: share * per_share + inner})
    at = list(end.src[1:]).index(loop)
    ranges = [*end.src[1 : 1 + at], share, inner, *end.src[2 + at :]]
    return simplify(sink(body.end(*ranges))), int(axis)


def merge_reduce_ranges(kernel: UOp) -> UOp:
    """A sum over two reduce ranges that every load moves along as along one, rewritten as a sum over one
    range: a weight's gradient x.T @ dy in a model whose x is (batch, positions, features) sums over batch b
    and position t, each load at index ... + s T b + s t, which is ... + s k for k = T b + t over B T values.
    pack_matmul packs sums over one reduce range; the kernel comes back as it was where some load, gate or
    other node sees the two ranges apart. k runs through (b, t) in memory order, b outer; where the loops
    were nested the other way, the sum now adds in another order, which changes rounding as any reordering
    of a float sum does."""
    while True:
        reduces = [u for u in kernel.toposort() if u.op is Ops.REDUCE]
        if len(reduces) != 1 or len(reduces[0].src) < 3:
            return kernel
        merged = next(
            (m for a, b in itertools.permutations(reduces[0].src[1:], 2) if (m := _merged(kernel, reduces[0], a, b))),
            None,
        )
        if merged is None:
            return kernel
        kernel = merged


def _merged(kernel: UOp, total: UOp, outer: UOp, inner: UOp) -> UOp | None:
    """The kernel with reduce ranges `outer` and `inner` made one, k = outer * n + inner for inner's n
    trips, where every load index that moves along them is linear in them with outer's stride n times inner's;
    None where that does not hold, or either range is used outside load indices."""
    n = inner.src[0].arg
    joined = range_(UOp.const(outer.src[0].arg * n, outer.scalar_dtype), outer.arg.axis, outer.arg.kind)
    pair = {outer, inner}
    indices = {}
    for load in (u for u in total.src[0].toposort() if u.op is Ops.LOAD):
        index = load.src[1]
        terms, _ = linear_terms(index)
        if not pair & set(index.toposort()):
            continue
        hidden = any(pair & set(t.toposort()) for t in terms if t not in pair)
        if hidden or terms.get(outer, 0) != n * terms.get(inner, 0):
            return None
        # outer's term is n times inner's: index - s outer - s' inner + s' k, as a substitution
        indices[index] = substitute(index, {outer: UOp.const(0, outer.scalar_dtype), inner: joined})
    value = substitute(total.src[0], indices)
    ranges = [joined if r is outer else r for r in total.src[1:] if r is not inner]
    merged = substitute(kernel, {total: UOp(Ops.REDUCE, total.dtype, (value, *ranges), total.arg)})
    return None if pair & set(merged.toposort()) else simplify(merged)


def find_packable(kernel: UOp, threads: int = 1) -> Packable | None:
    """The B of a large float32 matmul kernel: one store of one sum over one reduce range k, whose innermost
    output range j moves a load that depends on j and k only, from a buffer the kernel reads nowhere else.

    j's size n must be a multiple of VECTOR_LANES, not of the panel: a last panel that n does not fill is padded
    (split_range), and its columns past n are whole vectors that are neither read nor stored. Where n is no
    multiple of VECTOR_LANES, a vector would hold columns on both sides of n, and its store would need a mask
    lane by lane, which gcc's vector extension has no plain way to write; such a matmul keeps choose_opts's
    plan.
    The one in the models, the GPT's vocabulary of 65, does m n k = 64 65 256 multiply-adds, below
    PACK_MIN_WORK: packing would not pay there anyway."""
    nodes = kernel.toposort()
    reduces = [u for u in nodes if u.op is Ops.REDUCE]
    end = kernel.src[0] if len(kernel.src) == 1 else None
    if end is None or end.op is not Ops.END or end.src[0].op is not Ops.STORE:
        return None
    if len(reduces) != 1 or len(reduces[0].src) != 2:
        return None
    total, k = reduces[0], reduces[0].src[1]
    j = end.src[-1]
    work = prod(r.src[0].arg for r in (*end.src[1:], k))
    if total.arg is not Ops.ADD or total.dtype is not dtypes.float32 or work < PACK_MIN_WORK:
        return None
    if j.src[0].arg % VECTOR_LANES:
        return None
    load = _sole_load(kernel, total, {j, k})
    return None if load is None else Packable(load, j, k, panel_width(j.src[0].arg, threads))


def panel_width(n: int, threads: int) -> int:
    """The widest of PANELS unless, for n columns split into panels among `threads`, the busiest thread
    would get more than WIDE_TILE_GAIN times the columns the narrowest panels leave it: a last panel that
    n does not fill is padded, and the panels may not split evenly. At n = 1024 on two threads, panels of
    48 leave a thread 11 of 22 (528 columns; the last panel holds 32 of padding) against 16 of 32 (512), and
    the plan ran 4-6% faster; at 512, 6 of 11 (288) against 8 of 16 (256), and it ran 10% slower."""
    if threads < 1:
        raise ValueError(f"panel_width: {threads} threads; a plan that packs runs on at least one")

    def busiest(width: int) -> int:
        panels = -(-n // width)
        return -(-panels // threads) * width

    narrowest = busiest(PANELS[-1])
    return next(w for w in PANELS if busiest(w) <= narrowest * WIDE_TILE_GAIN)


def find_rows(kernel: UOp, rows: UOp, k: UOp) -> Packable | None:
    """A's load, to be packed into groups of TILE_ROWS rows: the tile's eight values for each k next to each
    other, and the groups one after another in k order, whichever way A is stored."""
    (total,) = [u for u in kernel.toposort() if u.op is Ops.REDUCE]
    load = _sole_load(kernel, total, {rows, k})
    return None if load is None else Packable(load, rows, k, TILE_ROWS)


def packs_rows(a: Packable) -> bool:
    """Whether A is packed: where the reduce loop strides through it (A stored as (k, m)). Stored as (m, k),
    A is read as it is, eight rows k floats apart. At 1024, packing it too made A @ B and A @ B.T 2-9% faster
    on one thread but 6-8% slower on two: there the matmul run right after A's copy took 0.6-1.0 ms longer
    than the matmul alone, while the copy alone took 0.18 ms (notes 153)."""
    return not a.along_k


def _sole_load(kernel: UOp, total: UOp, moved_by: set[UOp]) -> UOp | None:
    """The ungated load in the sum that exactly the ranges `moved_by` move, from a buffer read nowhere else."""
    nodes = kernel.toposort()
    for load in (u for u in total.src[0].toposort() if u.op is Ops.LOAD and len(u.src) == 2):
        readers = [u for u in nodes if u.op in (Ops.LOAD, Ops.STORE) and u.src[0] is load.src[0]]
        if {r for r in load.src[1].toposort() if r.op is Ops.RANGE} == moved_by and readers == [load]:
            return load
    return None


def pack_kernel(p: Packable) -> UOp:
    """The copy: packed[(o k + kk) w + l] = the operand at index o w + l of its range, row kk. Slot 0 is the
    operand, slot 1 the copy. Where a block's row is narrower than a cache line (A's groups of 8 floats), the
    rows run in blocks of COPY_ROWS, kk = COPY_ROWS kb + ki, the loops (o, kb, ki, l): threaded over kb
    (copy_opts), a thread writes COPY_ROWS rows of a block, whole lines one after the other, before it moves
    to the next block; row by row, it wrote half a line to each of the m / 8 blocks in turn (A's copy at
    m = k = 1024, one thread, in vectors: 0.59 ms row by row, 0.34 ms in blocks; notes 134)."""
    index_dtype = p.column.scalar_dtype
    groups, rows, width = p.blocks
    block, k_inner = copy_block(p)
    sizes = (groups, rows // block, block, width) if block > 1 else (groups, rows, width)
    o, kb, *ki, lane = (range_(UOp.const(size, index_dtype), axis) for axis, size in enumerate(sizes))
    kk = kb * block + ki[0] if ki else kb
    src = p.load.src[0]
    source = UOp.define_global(0, src.arg.size, src.scalar_dtype)
    index = substitute(p.load.src[1], {p.column: o * width + lane, p.reduce: kk, src: source})
    packed = UOp.define_global(1, p.size, src.scalar_dtype)
    # a padded block's columns past the operand's end read nothing: they are zeros
    value = source.load(index, _inside(o * width + lane, p.column.src[0].arg, width))
    store = packed.store((o * rows + kk) * width + lane, value)
    return simplify(sink(store.end(*((o, kb, lane, *ki) if k_inner else (o, kb, *ki, lane)))))


def copy_block(p: Packable) -> tuple[int, bool]:
    """The rows of k a copy writes to one block before the next, and whether k runs inside the block's lanes.

    A panel of B stored as (n, k) gathers, at each k, a float from each of its 32 or 48 rows, k floats
    apart: at k = 1024, as many lines in one set of the 12-way L1, each evicted before the next k reads the
    rest of it. Its lanes go outside a block of rows of k instead, each lane reading whole lines (the copy
    alone, one thread, n = k = 1024: 0.69-0.79 ms before, 0.44 ms with blocks of LINE_FLOATS rows; notes
    144). Blocks of four lines let the prefetcher fetch a row's next lines while the block reads it: in a
    plan, after the matmul has pushed B out of the core's caches, the copy at 1024 took 0.44 ms against 0.78
    with blocks of one line (notes 157). A's groups of 8 rows stored as (m, k) take only 8 lines of a set,
    and ran 8% slower in this order: they keep the order of rows narrower than a line (pack_kernel)."""
    rows, width = p.blocks[1:]
    if width < LINE_FLOATS:
        return next(b for b in (COPY_ROWS, 4, 2, 1) if rows % b == 0), False
    if p.along_k:
        return next(b for b in (4 * LINE_FLOATS, LINE_FLOATS, 8, 4, 2, 1) if rows % b == 0), True
    return 1, False


def copy_opts(copy: UOp) -> Opts:
    """choose_opts's opts for a packing copy, threaded over the axis along which the copy reads its operand
    with the largest stride, so that each thread's inner loops walk the operand in memory order; and its
    panel's width moved as vectors where the operand lies along it too.

    B of A @ B, stored as (k, n), is copied in panels of w = 32 or 48 columns. Threaded over the panels, as
    choose_opts would, a thread reads w floats from each of k rows n floats apart, each row in a page of
    its own, and the prefetchers do not cross pages; threaded over k, a thread reads whole rows, w floats of
    each panel in turn, and the copy takes half the time (DEBUG=3, n = 1024; notes 116). B stored as (n, k)
    (A @ B.T) is read down its columns either way; its largest stride is the panel's, as choose_opts has it."""
    opts = copy_vectors(copy, choose_opts(copy))
    load = next(u for u in copy.toposort() if u.op is Ops.LOAD)
    terms, _ = linear_terms(load.src[1])
    strides = {r: abs(c) for r, c in terms.items() if r.op is Ops.RANGE and r.src[0].arg > 1}
    if opts.thread is None or not strides:
        return opts
    return dataclasses.replace(opts, thread=max(strides, key=strides.__getitem__).arg.axis)


def copy_vectors(copy: UOp, opts: Opts) -> Opts:
    """`opts` with a copy's innermost axis (a panel's width, 48, 32 or 8 floats) as whole vectors, where the
    operand lies along it as the panel does (B stored as (k, n), A as (k, m)): a vector load and a vector store
    per 16 floats. gcc did not vectorize the plain loop itself: in a threaded kernel the loop sits in the
    function OpenMP outlines, where, with -fwrapv, it could not prove that an int index does not wrap (notes
    133; indices are 64-bit now where they cannot wrap, notes 155, and the copies keep their named vectors)."""
    width = max((u for u in copy.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg.axis)
    lanes = min(VECTOR_LANES, width.src[0].arg)
    if not can_vectorize(copy, width.arg.axis, lanes):  # B stored as (n, k): a transpose, read down columns
        return opts
    upcast = {width.arg.axis: width.src[0].arg // lanes} if width.src[0].arg > lanes else {}
    return dataclasses.replace(opts, vector=(width.arg.axis, lanes), upcast=upcast)


def split_range(kernel: UOp, p: Packable, outermost: bool) -> tuple[UOp, int]:
    """The matmul reading p's copy in the operand's slot, and the new axis: p's range becomes a block range
    (keeping its axis) and a range over the block (a new axis). With `outermost`, the block loop goes outside
    all others: B's panels, each read from cache by every row of A, the read hinted to prefetch the panel
    PREFETCH_STEPS rows of k ahead. A's groups are not hinted: the upcast copies its read once per row of
    the tile, and eight prefetches of one line per step of k made A.T @ B 4-7% slower than none; one per step
    did not pay in the plans either (notes 164)."""
    axis = 1 + max(u.arg.axis for u in kernel.toposort() if u.op is Ops.RANGE)
    index_dtype = p.column.scalar_dtype
    block = range_(UOp.const(p.blocks[0], index_dtype), p.column.arg.axis)
    inner = range_(UOp.const(p.width, index_dtype), axis)
    packed = UOp.define_global(p.load.src[0].arg.slot, p.size, p.load.scalar_dtype)
    ahead = PREFETCH_STEPS * p.width if outermost else None
    read = packed.load((block * p.blocks[1] + p.reduce) * p.width + inner, prefetch=ahead)
    end = kernel.src[0]
    body = substitute(end.src[0], {p.load: read})
    gate = _inside(p.column, p.column.src[0].arg, p.width)
    if gate is not None:
        body = _gated(body, p.column, gate)
    body = substitute(body, {p.column: block * p.width + inner})
    others = [r for r in end.src[1:] if r is not p.column]
    if outermost:
        ranges = [block, *others, inner]
    else:
        at = list(end.src[1:]).index(p.column)
        ranges = [*others[:at], block, inner, *others[at:]]
    return simplify(sink(body.end(*ranges))), int(axis)


def _inside(j: UOp, n: int, width: int) -> UOp | None:
    """Whether column j lies before n, where blocks of `width` columns overrun it (None where they fit).
    Written (j // VECTOR_LANES) * VECTOR_LANES < n, which is j < n for n a multiple of VECTOR_LANES
    (find_packable): once vectorize splits j into 16 v + lane, simplify makes it a test of v alone, one gate
    for a whole vector."""
    return None if n % width == 0 else (j // VECTOR_LANES) * VECTOR_LANES < n


def _gated(store: UOp, j: UOp, gate: UOp) -> UOp:
    """The store, and every load that moves along j (a fused bias, say), under `gate`: the padded panel's
    columns are computed from its zeros, and read and write nothing past the operands' ends."""
    loads = {
        u: u.src[0].load(u.src[1], gate if len(u.src) == 2 else u.src[2] & gate)
        for u in store.toposort()
        if u.op is Ops.LOAD and j in u.src[1].toposort()
    }
    gated = substitute(store, loads)
    return gated.src[0].store(gated.src[1], gated.src[2], gate)
