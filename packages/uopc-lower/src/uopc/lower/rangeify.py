"""rangeify: from a shaped graph to one kernel of loops over flat memory.

A shaped graph says *what* to compute: buffers, elementwise math, movement ops, reductions. A kernel says
*how*: a loop (a RANGE) per output axis, a load from a flat buffer at an index expression, a store. The
translation walks the graph from the output down, carrying for every node the index expression of the
element being computed. Each movement op is a rewrite of those index expressions, so it costs nothing at
run time; a reduction opens new loops; a buffer becomes a load. The index expressions are simplified with
uopc.ir's symbolic rules as they are built, so a reshape of a permute leaves no division where none is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from uopc.ir import (
    AxisType,
    Ops,
    PatternMatcher,
    UOp,
    UopcError,
    UPat,
    dtypes,
    graph_rewrite,
    inline_call,
    never_wraps,
    prod,
    range_,
    round_to,
    simplify,
    sink,
    toposort,
    vmax,
    vmin,
)

Index = tuple[UOp, ...]

Memo = dict[UOp, UOp]
"""simplify's memo (node -> simplified node): kernels over the same shapes flatten and unflatten the same
index expressions, and a model's repeated layers make the same kernels again; three of every four
simplifications in a GPT step's plan had been done before, and most of the rest share subexpressions with
them. Its owner (make_plan: one per plan) decides how long it holds the nodes in it alive."""

Job = tuple[UOp, Index, UOp]  # (shaped node, index of the element wanted, is that element in bounds)


class LowerError(UopcError, ValueError):
    """A shaped graph rangeify cannot lower: an op with no meaning in a kernel, or outputs that disagree."""


def flat_index(idx: Index, shape: Sequence[int], memo: Memo | None = None) -> UOp:
    """The row-major offset of element `idx` of an array of `shape`, in the integer type of `idx`."""
    flat = UOp.const(0, idx[0].scalar_dtype if idx else WIDE_INDEX)
    for i, s in zip(idx, shape, strict=True):
        flat = flat * s + i
    return simplify(flat, memo)


def unflat_index(flat: UOp, shape: Sequence[int], memo: Memo | None = None) -> Index:
    """The inverse of `flat_index`: the index in `shape` of the element at offset `flat`."""
    out: list[UOp] = []
    stride = prod(shape)
    for s in shape:
        stride //= s
        out.append(simplify((flat // stride) % s, memo) if s > 1 else flat.const_like(0))
    return tuple(out)


def source_index(m: UOp, idx: Index, valid: UOp, memo: Memo | None = None) -> tuple[Index, UOp]:
    """The index into m's source that element `idx` of movement op `m` reads, and when that read is valid
    (each simplified, with simplify's `memo` if one is given)."""
    shape, arg = m.src[0].shape, m.arg
    if m.op is Ops.RESHAPE:
        return unflat_index(flat_index(idx, m.shape, memo), shape, memo), valid
    if m.op is Ops.PERMUTE:
        return tuple(idx[arg.index(a)] for a in range(len(shape))), valid
    if m.op is Ops.EXPAND:
        return tuple(i.const_like(0) if s == 1 else i for i, s in zip(idx, shape, strict=True)), valid
    if m.op is Ops.SHRINK:
        return tuple(simplify(i + b, memo) for i, (b, _) in zip(idx, arg, strict=True)), valid
    if m.op is Ops.FLIP:
        return tuple(
            simplify((s - 1) - i, memo) if a in arg else i for a, (i, s) in enumerate(zip(idx, shape, strict=True))
        ), valid
    # PAD: the element is real where every index lies inside the source; elsewhere it is the fill value 0
    src_idx = tuple(simplify(i - b, memo) for i, (b, _) in zip(idx, arg, strict=True))
    for i, s in zip(src_idx, shape, strict=True):
        valid = valid & (i >= 0) & (i < s)
    return src_idx, simplify(valid, memo)


class Rangeify:
    """Lowers the nodes of one kernel; numbers its loops; remembers each (node, index, valid) it built, and
    (in `memo`, which may outlive it) each node it simplified."""

    def __init__(self, first_reduce_axis: int, memo: Memo | None = None) -> None:
        self.next_axis = first_reduce_axis
        self.memo = {} if memo is None else memo
        self.built: dict[Job, UOp] = {}
        self.children: dict[Job, list[Job]] = {}

    def sources(self, job: Job) -> list[Job]:
        """The jobs whose results `job` is built from; computed once, since a reduction makes new loops."""
        if job not in self.children:
            self.children[job] = self._sources(*job)
        return self.children[job]

    def _sources(self, u: UOp, idx: Index, valid: UOp) -> list[Job]:
        if _never(valid):  # only padding reads this element, and padding is 0: nothing below is needed
            return []
        if u.op in Ops.MOVEMENT:
            return [(u.src[0], *source_index(u, idx, valid, self.memo))]
        if u.op is Ops.REDUCE_AXIS:
            src_shape, axes = u.src[0].shape, u.arg[1]
            ranges = {a: self.new_range(src_shape[a]) for a in axes}
            return [(u.src[0], tuple(ranges.get(a, i) for a, i in enumerate(idx)), valid)]
        if u.op is Ops.STACK:
            return [(s, idx[1:], valid) for s in u.src]
        if u.op in Ops.ALU or u.op in (Ops.CAST, Ops.CONTIGUOUS, Ops.DETACH):
            return [(s, idx if s.shape else (), valid) for s in u.src]
        if u.op in (Ops.BUFFER, Ops.CONST):
            return []
        raise LowerError(f"{u.op.name}: cannot be lowered into a kernel (dtype {u.dtype.name}, shape {u.shape})")

    def new_range(self, size: int) -> UOp:
        if size == 1:
            return UOp.const(0, WIDE_INDEX)
        self.next_axis += 1
        return range_(UOp.const(size, WIDE_INDEX), self.next_axis - 1, AxisType.REDUCE)

    def build(self, job: Job, srcs: list[UOp]) -> UOp:
        """The scalar value of element `idx` of `u`, given the values of its sources."""
        u, idx, valid = job
        if _never(valid):  # its index may lie outside the source (a STACK has no element there)
            return _zero(u)
        if u.op is Ops.CONST:
            return u
        if u.op is Ops.BUFFER:
            ptr = UOp.define_global(u.arg.slot, u.arg.size, u.scalar_dtype)
            return ptr.load(idx[0], None if valid.op is Ops.CONST and valid.arg else valid)
        if u.op is Ops.PAD:
            return simplify(self.sources(job)[0][2].where(srcs[0], _zero(u)), self.memo)
        if u.op in Ops.MOVEMENT or u.op in (Ops.CONTIGUOUS, Ops.DETACH):
            return srcs[0]
        if u.op is Ops.REDUCE_AXIS:
            child_idx = self.sources(job)[0][1]
            ranges = [child_idx[a] for a in u.arg[1] if child_idx[a].op is Ops.RANGE]
            return UOp(Ops.REDUCE, u.dtype, (srcs[0], *ranges), u.arg[0]) if ranges else srcs[0]
        if u.op is Ops.STACK:
            return _select(idx[0], srcs)
        return UOp(u.op, u.dtype, srcs)

    def lower(self, root: UOp, idx: Index) -> UOp:
        """The scalar value of element `idx` of the shaped node `root`; iterative, each job built once."""
        stack: list[tuple[Job, bool]] = [((root, idx, UOp.const(True)), False)]
        while stack:
            job, sources_done = stack.pop()
            if job in self.built:
                continue
            if not sources_done:
                stack.append((job, True))
                stack += [(s, False) for s in self.sources(job) if s not in self.built]
                continue
            self.built[job] = self.build(job, [self.built[s] for s in self.sources(job)])
        return self.built[(root, idx, UOp.const(True))]


def _never(valid: UOp) -> bool:
    return valid.op is Ops.CONST and not valid.arg


def _zero(u: UOp) -> UOp:
    return UOp.const(round_to(u.scalar_dtype, 0), u.scalar_dtype)


def _select(i: UOp, values: list[UOp]) -> UOp:
    """values[i] for an index expression i: a chain of WHERE, shortened when i is known."""
    if i.op is Ops.CONST:
        chosen: UOp = values[i.arg]
        return chosen
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = i.eq(k).where(values[k], out)
    return out


_inline_calls = PatternMatcher([(UPat(Ops.CALL, name="c"), inline_call)])


WIDE_INDEX = dtypes.int64
"""The type index arithmetic is built in: wide enough that no index of a view within MAX_VIEW_ELEMENTS wraps."""
I32 = dtypes.int32

MAX_VIEW_ELEMENTS = 2**48
"""The most elements any shape in a kernel may have. Index expressions are sums of at most a few terms per
axis, each no larger than a view's element count, so below this limit no index value nor any constant
folded while simplifying one comes near 2**63."""


def check_view_sizes(values: Sequence[UOp]) -> None:
    """Refuse a graph holding a shape so large that its index arithmetic could wrap even in int64."""
    for u in toposort(sink(*values)):
        if u.size > MAX_VIEW_ELEMENTS:
            raise LowerError(
                f"rangeify: {u.op.name} {u.dtype.name}{u.shape} has {u.size} elements; "
                f"kernels take views of at most {MAX_VIEW_ELEMENTS} (2**48) elements"
            )


def index_nodes(kernel: UOp) -> list[UOp]:
    """The loop indices and the integer arithmetic computed from them alone: loop bounds and offsets."""
    found: set[UOp] = set()
    for u in toposort(kernel):
        from_loops = any(s in found for s in u.src) and all(s in found or s.op is Ops.CONST for s in u.src)
        if u.op is Ops.RANGE or (u.op in Ops.ALU and u.scalar_dtype.is_int and from_loops):
            found.add(u)
    return [u for u in toposort(kernel) if u in found]


def narrow_indices(kernel: UOp) -> UOp:
    """The kernel with its index arithmetic in int32 where bounds prove that every index value, loop bound and
    constant in it fits; otherwise as it is, in int64. Raises when an index may wrap even in int64."""
    indices = index_nodes(kernel)
    unproven = next((u for u in indices if not never_wraps(u)), None)
    if unproven is not None:
        raise LowerError(f"rangeify: cannot prove that an index ({unproven.op.name}) stays inside int64")
    is_index = set(indices)

    def offsets(u: UOp) -> list[int]:
        """Which sources of u are integer constants that take part in index arithmetic."""
        if u in is_index or (u.op in Ops.ALU and any(s in is_index for s in u.src)):
            return [k for k, s in enumerate(u.src) if s.op is Ops.CONST]
        return [1] if u.op in (Ops.LOAD, Ops.STORE) and u.src[1].op is Ops.CONST else []

    nodes = toposort(kernel)
    consts = [u.src[k] for u in nodes for k in offsets(u)]
    if any(not (I32.min <= vmin(u) and vmax(u) <= I32.max) for u in indices + consts):
        return kernel
    new: dict[UOp, UOp] = {}
    for u in nodes:
        src = [new.get(s, s) for s in u.src]
        for k in offsets(u):
            src[k] = UOp.const(u.src[k].arg, I32)
        new[u] = UOp(u.op, I32 if u in is_index else u.dtype, tuple(src), u.arg)
    return new[kernel]


def rangeify(outputs: Sequence[tuple[UOp, UOp]], memo: Memo | None = None) -> UOp:
    """The kernel that writes each shaped `value` into its `destination` BUFFER: `[(destination, value), ...]`.

    All values share one shape, so they share one loop nest: a loop per output axis longer than 1
    (axis numbers 0.. follow the output axes), and one per reduced axis inside (numbered after them).
    `memo` is simplify's, shared with the other kernels of a plan (see Memo).
    """
    memo = {} if memo is None else memo
    shape = outputs[0][1].shape
    for dest, value in outputs:
        if value.shape != shape:
            raise LowerError(f"rangeify: outputs of one kernel share a shape, got {value.shape} and {shape}")
        if dest.op is not Ops.BUFFER or dest.arg.size != prod(shape) or dest.dtype is not value.dtype:
            raise LowerError(
                f"rangeify: destination {dest.op.name} {dest.dtype.name} of size "
                f"{dest.arg.size if dest.op is Ops.BUFFER else '?'} cannot hold {value.dtype.name}{shape}"
            )
    check_view_sizes([v for _, v in outputs])
    loops = [range_(UOp.const(s, WIDE_INDEX), a) if s > 1 else UOp.const(0, WIDE_INDEX) for a, s in enumerate(shape)]
    ranges = [r for r in loops if r.op is Ops.RANGE]
    lowering = Rangeify(len(shape), memo)
    stores = []
    for dest, value in outputs:
        ptr = UOp.define_global(dest.arg.slot, dest.arg.size, dest.scalar_dtype)
        store = ptr.store(
            flat_index(tuple(loops), shape, memo), lowering.lower(graph_rewrite(value, _inline_calls), tuple(loops))
        )
        stores.append(store.end(*ranges) if ranges else store)
    return narrow_indices(simplify(sink(*stores), memo))
