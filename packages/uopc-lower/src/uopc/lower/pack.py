"""Packing: a matmul's B copied into the order its register tile reads it, by a kernel the plan runs first.

A matmul kernel C[i, j] = sum over k of A[i, k] * B[k, j] reads, for each k, a row of 64 of B's columns
into its register tile. Where B is stored as (k, n), those rows lie n floats apart; where a layer stores it
transposed, (n, k), each column is k floats from the next, and a tile's loads are 64 scattered floats. The
packing copy writes B once into panels, panel p holding columns 64p .. 64p+63 for k = 0, 1, ...: the
tile's reduce loop then walks one contiguous block of memory, the same for every layout, and the copy
(n k floats, against m n k multiply-adds) absorbs the layout. The packed matmul's loops put the panel
outermost: a panel (64 k floats, 256 KiB at k = 1024) stays in the core's L2 cache while every row of A
passes over it, which is the cache blocking.
"""

from __future__ import annotations

from dataclasses import dataclass

from uopc.ir import AxisType, Ops, UOp, dtypes, prod, range_, simplify, sink, substitute
from uopc.lower.opt import Opts, can_vectorize

PANEL = 64  # columns of B per panel: one register tile's width, 4 vectors of 16 floats
LANES = 16  # floats in one vector register of AVX-512
TILE_ROWS = 4  # rows of A per register tile: 4 x 4 vector accumulators, with room for B's 4 vectors
PACK_MIN_WORK = 1 << 24  # multiply-adds (m n k) from which packing pays: a 256^3 matmul


@dataclass(frozen=True)
class Packable:
    """A matmul kernel's load of B, and the ranges it moves along: the output column j and the reduce k."""

    load: UOp
    column: UOp
    reduce: UOp

    @property
    def panels(self) -> tuple[int, int, int]:
        """The packed copy's shape: panels, rows of B (k) in each, columns in each row."""
        return (self.column.src[0].arg // PANEL, self.reduce.src[0].arg, PANEL)

    @property
    def size(self) -> int:
        """Elements of the packed copy: n columns for each of k rows."""
        return int(self.column.src[0].arg * self.reduce.src[0].arg)


def find_packable(kernel: UOp) -> Packable | None:
    """The B of a large float32 matmul kernel: one store of one sum over one reduce range k, whose innermost
    output range j moves a load that depends on j and k only, from a buffer the kernel reads nowhere else."""
    nodes = kernel.toposort()
    reduces = [u for u in nodes if u.op is Ops.REDUCE]
    end = kernel.src[0] if len(kernel.src) == 1 else None
    if end is None or end.op is not Ops.END or len(reduces) != 1 or len(reduces[0].src) != 2:
        return None
    total, k = reduces[0], reduces[0].src[1]
    j = end.src[-1]
    work = prod(r.src[0].arg for r in (*end.src[1:], k))
    if total.arg is not Ops.ADD or total.dtype is not dtypes.float32 or work < PACK_MIN_WORK or j.src[0].arg % PANEL:
        return None
    for load in (u for u in total.src[0].toposort() if u.op is Ops.LOAD and len(u.src) == 2):
        moved_by = {r for r in load.src[1].toposort() if r.op is Ops.RANGE}
        readers = [u for u in nodes if u.op in (Ops.LOAD, Ops.STORE) and u.src[0] is load.src[0]]
        if moved_by == {j, k} and readers == [load]:
            p = Packable(load, j, k)
            packed = packed_matmul(kernel, p)  # its lanes must compute alike (no max of a fused relu, say)
            return p if can_vectorize(packed, _columns(packed), LANES) else None
    return None


def _columns(packed: UOp) -> int:
    """The axis of a panel's columns in a packed matmul: the one packed_matmul added, after all others."""
    return max(int(u.arg.axis) for u in packed.toposort() if u.op is Ops.RANGE)


def pack_kernel(p: Packable) -> UOp:
    """The copy: packed[(jo k + kk) 64 + jl] = B at column jo 64 + jl, row kk. Slot 0 is B, slot 1 the copy."""
    n, k = p.column.src[0].arg, p.reduce.src[0].arg
    index_dtype = p.column.scalar_dtype
    jo, kk, jl = (range_(UOp.const(size, index_dtype), axis) for axis, size in enumerate((n // PANEL, k, PANEL)))
    b = p.load.src[0]
    source = UOp.define_global(0, b.arg.size, b.scalar_dtype)
    index = substitute(p.load.src[1], {p.column: jo * PANEL + jl, p.reduce: kk, b: source})
    packed = UOp.define_global(1, p.size, b.scalar_dtype)
    return simplify(sink(packed.store((jo * k + kk) * PANEL + jl, source.load(index)).end(jo, kk, jl)))


def packed_matmul(kernel: UOp, p: Packable) -> UOp:
    """The matmul reading the packed copy, in B's slot: column j becomes panel jo and column jl within it, and
    the panel loop goes outermost, so each panel is read from cache by every row of A."""
    n, k = p.column.src[0].arg, p.reduce.src[0].arg
    index_dtype = p.column.scalar_dtype
    axis = 1 + max(u.arg.axis for u in kernel.toposort() if u.op is Ops.RANGE)
    jo = range_(UOp.const(n // PANEL, index_dtype), p.column.arg.axis)
    jl = range_(UOp.const(PANEL, index_dtype), axis)
    packed = UOp.define_global(p.load.src[0].arg.slot, p.size, p.load.scalar_dtype)
    read = packed.load((jo * k + p.reduce) * PANEL + jl)
    end = kernel.src[0]
    body = substitute(substitute(end.src[0], {p.load: read}), {p.column: jo * PANEL + jl})
    others = [r for r in end.src[1:] if r is not p.column]
    return simplify(sink(body.end(jo, *others, jl)))


def packed_opts(packed: UOp, p: Packable) -> Opts:
    """The register tile of a packed matmul: the panel's 64 columns as 4 vectors of 16 lanes and TILE_ROWS
    rows of A; threads over the panels where there are enough to share (each thread reads its own panels
    and all of A), else over the rows."""
    columns, panels = _columns(packed), p.column.arg.axis
    outputs = {u.arg.axis: u for u in packed.toposort() if u.op is Ops.RANGE and u.arg.kind is AxisType.LOOP}
    rows = outputs[max((a for a in outputs if a < panels), default=panels)]  # the output axis before B's columns
    upcast = {columns: PANEL // LANES}
    if rows.arg.axis != panels and rows.src[0].arg % TILE_ROWS == 0:
        upcast[rows.arg.axis] = TILE_ROWS
    enough = outputs[panels].src[0].arg >= 4 or rows.arg.axis == panels
    return Opts(upcast=upcast, vector=(columns, LANES), thread=panels if enough else rows.arg.axis)
