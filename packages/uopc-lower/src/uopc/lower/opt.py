"""Opts: the knobs that reshape a kernel's loops without changing what it computes.

upcast an output axis by n: its loop runs n times fewer iterations and computes n outputs per iteration,
in registers (a register tile: an upcast matmul computes a tile of outputs that all share one reduce loop).
unroll a reduce axis by n: the reduce loop runs n times fewer iterations, each combining n values.
thread an output axis: its loop becomes the outermost one and runs in parallel across CPU threads.
vector an output axis by n: n of its iterations run at once, as the n lanes of one SIMD register.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from uopc.ir import (
    AxisType,
    Ops,
    UOp,
    accumulator_dtype,
    dtypes,
    linear_terms,
    prod,
    range_,
    simplify,
    sink,
    substitute,
    toposort,
)
from uopc.lower.rangeify import LowerError


@dataclass(frozen=True)
class Opts:
    """Which axes to upcast, unroll and thread. Axis numbers are those of the kernel's ranges:
    the output axes first (0, 1, ...), then the reduce axes."""

    upcast: dict[int, int] = field(default_factory=dict)  # output axis -> factor
    unroll: dict[int, int] = field(default_factory=dict)  # reduce axis -> factor
    thread: int | None = None  # output axis to run in parallel
    vector: tuple[int, int] | None = None  # (output axis, lanes): that many of its iterations in one register

    def key(self) -> tuple[object, ...]:
        """Every field, hashable (dicts as sorted items): equal opts, equal keys, whatever fields come later."""
        values = (getattr(self, f.name) for f in fields(self))
        return tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in values)

    def to_json(self) -> str:
        """Every field, as JSON (dicts as sorted pairs): what an opts store (search.py) keeps on disk."""
        return json.dumps({f.name: v for f, v in zip(fields(self), self.key(), strict=True)})

    @staticmethod
    def from_json(text: str) -> Opts:
        """The opts `to_json` wrote; a ValueError (or KeyError, TypeError) for text it did not write."""
        d = json.loads(text)
        vector = d["vector"]
        return Opts(
            upcast={int(a): int(n) for a, n in d["upcast"]},
            unroll={int(a): int(n) for a, n in d["unroll"]},
            thread=None if d["thread"] is None else int(d["thread"]),
            vector=None if vector is None else (int(vector[0]), int(vector[1])),
        )


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
    return upcast_tile(kernel, {axis: n})


def upcast_tile(kernel: UOp, factors: dict[int, int], memo: dict[UOp, UOp] | None = None) -> UOp:
    """Upcast several output axes at once (axis -> factor): each statement is copied once per position of
    its register tile, the positions in row-major order of the axes; copy k of a range r of size n*m reads
    `outer * n + k` for it, where `outer` is the new loop of m iterations (the constant k if m is 1).
    `memo` is simplify's (see apply_opts): each copy of a node is simplified as it is made, its sources
    simplified before it, as one simplify of the whole tile would, without making the copy twice."""
    known: dict[UOp, UOp] = {} if memo is None else memo

    def simplified(u: UOp) -> UOp:
        return known[u] if u in known else simplify(u, known)

    values: dict[UOp, list[UOp]] = {}  # each upcast range -> its replacement in copy 0, 1, ...
    outers: dict[UOp, UOp] = {}
    for axis, n in sorted(factors.items()):
        r = find_range(kernel, axis)
        if r.arg.kind is AxisType.REDUCE:
            raise LowerError(f"opt: axis {axis} is a reduce axis; upcast takes output axes (use unroll)")
        outer = outers[r] = _split(r, n, "upcast")
        values[r] = [outer * n + k if outer.src[0].arg > 1 else UOp.const(k, r.scalar_dtype) for k in range(n)]
    out = []
    for end in kernel.src:
        tiled = [r for r in values if end.op is Ops.END and r in end.src[1:]]
        if not tiled:
            out.append(end)
            continue
        ranges = [outers.get(x, x) for x in end.src[1:]]
        ranges = [x for x in ranges if x.src[0].arg > 1 or x not in outers.values()]
        positions = list(itertools.product(*(range(len(values[r])) for r in tiled)))
        tile = {r: [values[r][p[i]] for p in positions] for i, r in enumerate(tiled)}
        out += [stmt.end(*ranges) if ranges else stmt for stmt in copies(end.src[0], tile, len(positions), simplified)]
    return simplify(sink(*out), known)


def copies(
    root: UOp, values: dict[UOp, list[UOp]], count: int, finish: Callable[[UOp], UOp] = lambda u: u
) -> list[UOp]:
    """`root` `count` times, node `r` replaced by values[r][i] in copy i, and each new node passed through
    `finish` (upcast_tile's simplifies it). One walk over the graph: a node that depends on none of the
    replaced nodes is shared by all the copies (hash consing would make the copies of it one node anyway;
    the walk does not build them)."""
    copied: dict[UOp, list[UOp]] = dict(values)
    for u in toposort(root):
        if u in copied or not any(s in copied for s in u.src):
            continue
        copied[u] = [
            finish(u.replace(src=tuple(copied[s][i] if s in copied else s for s in u.src))) for i in range(count)
        ]
    return copied.get(root, [root] * count)


def unroll(kernel: UOp, axis: int, n: int, memo: dict[UOp, UOp] | None = None) -> UOp:
    """Combine n values per iteration of reduce `axis`: the loop body is copied n times and chained.
    `memo` is simplify's (see apply_opts)."""
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
    return simplify(substitute(kernel, new), memo)


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


def vectorize(kernel: UOp, axis: int, lanes: int, memo: dict[UOp, UOp] | None = None) -> UOp:
    """Split output `axis` into a loop over vectors and the `lanes` lanes of each: index = outer * lanes +
    lane, the lane range a new axis of kind VECTOR placed just inside the outer loop. A renderer runs the
    lanes as one SIMD register, so every value that depends on them must be a vector (check_vector).
    `memo` is simplify's (see apply_opts)."""
    r = find_range(kernel, axis)
    if r.arg.kind is not AxisType.LOOP:
        raise LowerError(f"opt: only an output axis can be vectorized, axis {axis} is {r.arg.kind.value}")
    outer = _split(r, lanes, "vectorize")
    lane = range_(UOp.const(lanes, r.scalar_dtype), 1 + max(u.arg.axis for u in kernel.toposort() if u.op is Ops.RANGE))
    lane = lane.replace(arg=lane.arg._replace(kind=AxisType.VECTOR))
    whole = outer.src[0].arg > 1
    index = outer * lanes + lane if whole else lane
    out = []
    for end in kernel.src:
        if end.op is Ops.END and r in end.src[1:]:
            ranges = [x for x in end.src[1:] if x is not r]
            at = list(end.src[1:]).index(r)
            ranges[at:at] = [outer, lane] if whole else [lane]
            out.append(substitute(end.src[0], {r: index}).end(*ranges))
        else:
            out.append(end)
    vectored = simplify(sink(*out), memo)
    check_vector(vectored, find_range(vectored, lane.arg.axis))
    return vectored


def can_vectorize(kernel: UOp, axis: int, lanes: int) -> bool:
    """Whether `vectorize` accepts the axis: the heuristic's question before it picks vectors."""
    try:
        vectorize(kernel, axis, lanes)
    except LowerError:
        return False
    return True


_VECTOR_OPS = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.LOAD, Ops.REDUCE, Ops.WHERE)  # float32 lanes, computed alike
# bool lanes (masks): comparisons of float32 lanes and the logic on them, as a fused relu's backward needs
_MASK_OPS = (Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR)


def check_vector(kernel: UOp, lane: UOp) -> None:
    """Refuse a vector axis the renderer could not run as vectors: every load and store that moves along the
    lanes must read or write them contiguously (stride 1, a gate the same for all lanes), every value that
    depends on the lanes must be a float32 sum of products of loads, and the lane index itself may only
    address memory."""
    lanes: set[UOp] = {lane}  # nodes whose value changes from lane to lane
    data: set[UOp] = set()  # of those, the values loaded or computed from loads: the vectors
    for u in kernel.toposort():
        if u is lane or not any(s in lanes for s in u.src):
            continue
        lanes.add(u)
        if u.op in (Ops.LOAD, Ops.STORE):
            _check_lane_index(u, lane, lanes)
        if u.op is Ops.LOAD or any(s in data for s in u.src):
            data.add(u)
            _check_vector_value(u, lane, [s for s in u.src if s in lanes and s not in data])


def _check_vector_value(u: UOp, lane: UOp, indices: list[UOp]) -> None:
    """`u`, a vector, computes lanes alike; `indices` are its lane-dependent integer sources."""
    axis = lane.arg.axis
    if u.op is Ops.STORE and indices != [u.src[1]]:
        raise LowerError(f"opt: cannot vectorize axis {axis}: a store along it stores one value to all lanes")
    if u.op is Ops.STORE and u.src[2].dtype is not dtypes.float32:
        stored = u.src[2].dtype
        raise LowerError(f"opt: cannot vectorize axis {axis}: a store of {stored} along it (vectors store float32)")
    if u.op in (Ops.STORE, Ops.END, Ops.SINK):  # an END lists the lane range among its loops
        return
    if any(s is not u.src[1] or u.op is not Ops.LOAD for s in indices):
        raise LowerError(f"opt: cannot vectorize axis {axis}: {u.op.name} uses the lane index as a value")
    op = u.arg if u.op is Ops.REDUCE else u.op
    floats = op in _VECTOR_OPS and u.dtype is dtypes.float32
    compared = {s.dtype for s in u.src} <= {dtypes.float32, dtypes.bool}
    if not floats and not (op in _MASK_OPS and u.dtype is dtypes.bool and compared):
        raise LowerError(
            f"opt: cannot vectorize axis {axis}: {op.name} of {u.dtype} depends on it; vectors hold float32 "
            "sums, products and selections of loads, and comparisons of them"
        )


def _check_lane_index(u: UOp, lane: UOp, lanes: set[UOp]) -> None:
    """A vector load or store moves one element per lane, and its gate, if any, lets all lanes through or
    none: a renderer tests it once per vector (a packed matmul's padded panel, pack.py)."""
    terms, _ = linear_terms(u.src[1])
    hidden = any(lane in t.toposort() for t in terms if t is not lane)
    by_lane = len(u.src) == (3 if u.op is Ops.LOAD else 4) and u.src[-1] in lanes
    if terms.get(lane) != 1 or hidden or by_lane:
        raise LowerError(
            f"opt: cannot vectorize axis {lane.arg.axis}: the {u.op.name} of data{u.src[0].arg.slot} does not "
            f"move one element per lane (stride {terms.get(lane, 'not linear')}, gated lane by lane {by_lane})"
        )


THREAD_MIN_WORK = 1 << 18  # below this many inner iterations, starting threads costs more than it saves
TILE_NODES = 1280  # tile values x body nodes, at most: gcc's time grows with the copies (a fused matmul: 20 nodes, 8x8)


def _body_size(kernel: UOp) -> int:
    """The nodes a register tile copies once per value: everything but constants and loop bounds."""
    return sum(1 for u in kernel.toposort() if u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_GLOBAL))


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


# An output at least this large is written with streaming stores: twice the L2 caches of the 2-core machine
# the benchmarks run on (2 MiB each; its L3, shared with other machines, holds little of one kernel's data).
# Below it, the next kernel reads an output mostly from cache, which a streaming store would have bypassed.
STREAM_MIN_BYTES = 8 << 20


def streamed_slots(kernel: UOp) -> frozenset[int]:
    """The buffers a renderer may write with streaming (non-temporal) stores, around the cache: those at least
    STREAM_MIN_BYTES large that the kernel stores into exactly once, at the index of its threaded loop (so each
    thread writes one contiguous run), and never loads from (a load would read what a store has not written).

    An ordinary store to a line that is not in cache reads the line first (write-allocate), so a kernel that
    writes n bytes moves 2n; a streaming store moves n. Chapter 13 measures the difference."""
    nodes = kernel.toposort()
    loaded = {u.src[0].arg.slot for u in nodes if u.op is Ops.LOAD}
    stores: dict[int, list[UOp]] = {}
    for u in nodes:
        if u.op is Ops.STORE:
            stores.setdefault(u.src[0].arg.slot, []).append(u)
    out = set()
    for slot, (store, *more) in stores.items():
        index, buffer = store.src[1], store.src[0].arg
        threaded = index.op is Ops.RANGE and index.arg.kind is AxisType.THREAD
        large = buffer.size * store.src[2].scalar_dtype.itemsize >= STREAM_MIN_BYTES
        ungated = len(store.src) == 3  # a streamed block goes out whole, with what a false gate left unwritten
        if threaded and large and ungated and not more and slot not in loaded:
            out.add(slot)
    return frozenset(out)


def _reduce_loads(kernel: UOp) -> list[tuple[UOp, bool]]:
    """(reduce range, whether the load strides along it), for each load and each reduce range that moves it."""
    nodes = kernel.toposort()
    reduces = {u for u in nodes if u.op is Ops.RANGE and u.arg.kind in (AxisType.REDUCE, AxisType.UNROLL)}
    loads = [u for u in nodes if u.op is Ops.LOAD]
    inside: dict[UOp, frozenset[UOp]] = {}  # node of an index -> the reduce ranges it is computed from
    for u in toposort(sink(*(load.src[1] for load in loads))) if loads else ():  # indices, not values: fewer
        inside[u] = frozenset([u]) if u in reduces else frozenset().union(*(inside[s] for s in u.src))
    out = []
    for load in loads:
        terms, _ = linear_terms(load.src[1])
        for r in reduces:
            stride = terms.get(r, 0)
            hidden = any(r in inside[t] for t in terms if t is not r)  # r inside a division or a product
            if stride or hidden:
                out.append((r, stride != 1 or hidden))
    return out


def choose_opts(kernel: UOp) -> Opts:
    """A simple default, measured on a few matmul layouts (notes 31): a register tile in reduce kernels, 8x8
    unless every load strides along the reduce (then 4x4), and threads for big work. The tile is smaller
    where the kernel's body is long (TILE_NODES): a layer norm's backward fused into a reduce made 32
    copies of 46 nodes, 25 kB of C for gcc to optimize."""
    ranges = sorted((u for u in kernel.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg.axis)
    outputs = [r for r in ranges if r.arg.kind is AxisType.LOOP]
    work = prod(r.src[0].arg for r in ranges)
    upcast: dict[int, int] = {}
    vector = None
    if any(r.arg.kind is AxisType.REDUCE for r in ranges):
        vector = reduce_vector(kernel, outputs)
        strides = reduce_strides(kernel)
        factors = (4, 2) if strides and all(strides) and vector is None else (8, 4, 2)
        most = max(1, TILE_NODES // _body_size(kernel))
        for r in outputs[-2:]:
            tile = prod(upcast.values())
            n = next((f for f in factors if r.src[0].arg % f == 0 and r.src[0].arg > f and tile * f <= most), None)
            if n is not None and (vector is None or r.arg.axis != vector[0]):
                upcast[r.arg.axis] = n
    trips = {r.arg.axis: r.src[0].arg // upcast.get(r.arg.axis, 1) for r in outputs}
    if vector is not None:
        trips[vector[0]] //= vector[1]
    left = [r for r in outputs if trips[r.arg.axis] > 1]
    threaded = left[0].arg.axis if left and work >= THREAD_MIN_WORK else None
    return Opts(upcast=upcast, vector=vector, thread=threaded)


VECTOR_LANES = 16  # float32s in one AVX-512 register


def reduce_vector(kernel: UOp, outputs: list[UOp]) -> tuple[int, int] | None:
    """A reduce kernel's innermost output axis as vector lanes, where its loads and store lie along it
    contiguously and it holds whole vectors (a matmul too small to pack, a sum over a batch): one
    accumulator per 16 outputs instead of a scalar tile."""
    if not outputs or outputs[-1].src[0].arg % VECTOR_LANES:
        return None
    axis = outputs[-1].arg.axis
    return (axis, VECTOR_LANES) if can_vectorize(kernel, axis, VECTOR_LANES) else None


MAX_UPCAST = 64  # values per register tile: gcc needed minutes for a 16x16 tile, and it spilled registers


def apply_opts(kernel: UOp, opts: Opts, memo: dict[UOp, UOp] | None = None) -> UOp:
    """Unroll, then vectorize, then upcast, then thread; each step keeps the kernel's meaning.

    Each step simplifies the kernel it made. Most of that kernel was simplified before: by rangeify, by
    the step before, or in another kernel of the same plan (their index expressions are built from the
    same loops, and hash consing makes them the same nodes). A `memo` given to several calls (simplify's,
    node -> simplified node) skips those nodes: it halves the opts of a GPT step (notes 120)."""
    tile = prod(opts.upcast.values())
    if tile > MAX_UPCAST:
        raise LowerError(f"opt: upcast {opts.upcast} makes a tile of {tile} values; at most {MAX_UPCAST} are allowed")
    for axis, n in sorted(opts.unroll.items()):
        kernel = unroll(kernel, axis, n, memo)
    if opts.vector is not None:
        kernel = vectorize(kernel, *opts.vector, memo)
    if opts.upcast:
        kernel = upcast_tile(kernel, opts.upcast, memo)
    if opts.thread is not None:
        kernel = thread(kernel, opts.thread)
    return kernel
