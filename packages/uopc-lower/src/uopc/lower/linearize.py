"""linearize: order a kernel's graph into a flat program with correct loop scopes.

A kernel graph has no order: a load, a multiply and a store float free, tied only by their sources. A C
function is a sequence of statements inside nested loops. Linearizing decides, for each node, which loop
it lives in (the innermost loop over a range it depends on: so work that does not depend on a loop is
hoisted out of it) and in what order the statements and loops of each block come. `linear_order` does that
for a graph; `linearize`, the pipeline's arrow from a Kernel to a LinearProgram, applies the kernel's opts
first and adds what a renderer needs to know.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from uopc.ir import (
    DType,
    Ops,
    UOp,
    UopcError,
    accumulator_dtype,
    dtypes,
    round_to,
    toposort,
)
from uopc.lower.opt import apply_opts, streamed_slots, strided_axes
from uopc.lower.stages import Kernel, LinearProgram


class LinearizeError(UopcError, RuntimeError):
    """A kernel that cannot be ordered: a loop that is never closed, or nodes that cannot be scheduled."""


ROOT = None  # the block outside every loop
Block = UOp | None


def loop_ranges(nodes: Iterable[UOp], known: dict[UOp, frozenset[UOp]] | None = None) -> dict[UOp, frozenset[UOp]]:
    """For each node (sources first), the ranges whose loops must be open where it is computed. With
    `known`, the answers already in it are kept and the new ones added to it."""
    ranges: dict[UOp, frozenset[UOp]] = {} if known is None else known
    for u in nodes:
        if u in ranges:
            continue
        inner = frozenset().union(*(ranges[s] for s in u.src))
        if u.op is Ops.RANGE:
            inner |= {u}
        elif u.op in (Ops.END, Ops.REDUCE):  # after the statement, its loops are closed again
            inner -= set(u.src[1:])
        ranges[u] = inner
    return ranges


def reduce_identity(op: Ops, dtype: DType) -> UOp:
    """The value an accumulator starts from: 0 for a sum, -inf (or the smallest integer) for a max."""
    value = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: dtype.min, Ops.MIN: dtype.max}[op]
    return UOp.const(round_to(dtype, value), dtype)


def shared_scopes(nodes: list[UOp], ranges: dict[UOp, frozenset[UOp]]) -> dict[UOp, frozenset[UOp]]:
    """For each reduce range among a kernel's `nodes` (sources first), the loops around it: those the values
    of all REDUCEs over it depend on. `ranges` (loop_ranges') gets the answers for the nodes.

    REDUCEs can share a reduce loop (the copies an upcast makes) yet depend on different loops (a copy
    that reads only padding depends on none). The loop has one place, inside all of them, so every
    accumulator updated in it is declared there too, and starts again on each iteration around it."""
    loop_ranges(nodes, ranges)
    scopes: dict[UOp, frozenset[UOp]] = {}
    for r in (u for u in nodes if u.op is Ops.REDUCE):
        outer = ranges[r.src[0]] - set(r.src[1:])
        for x in r.src[1:]:
            scopes[x] = scopes.get(x, frozenset()) | outer
    return scopes


def _accumulate(r: UOp, ctx: dict[str, Any]) -> UOp:
    value, reduce_ranges, known = r.src[0], r.src[1:], ctx["ranges"]
    loop_ranges(toposort(value, lambda u: () if u in known else u.src), known)  # the copies of a tile share nodes
    outer = known[value].union(*(ctx["scopes"].get(x, ()) for x in reduce_ranges))
    scope = sorted(outer - set(reduce_ranges), key=lambda x: x.arg.axis)
    dtype = accumulator_dtype(r.arg, r.scalar_dtype)  # float32 for a float16 sum: see accumulator_dtype
    acc = UOp(Ops.DEFINE_ACC, dtype, (reduce_identity(r.arg, dtype), *scope), ctx["accs"])
    ctx["accs"] += 1
    update = UOp(Ops.ACCUMULATE, dtype, (acc, value.cast(dtype), *reduce_ranges), r.arg)
    return update.end(*reduce_ranges).cast(r.scalar_dtype)


def expand_reduces(kernel: UOp, ranges: dict[UOp, frozenset[UOp]] | None = None) -> UOp:
    """Each REDUCE becomes an accumulator: declared where its result is used, updated inside its loops,
    and read (the END) after they close. The declaration depends on every enclosing range, so it sits
    inside those loops: each output element, and each thread, gets its own accumulator.

    One walk, sources first, so a REDUCE whose value holds another REDUCE sees it expanded already. (One
    rule, but not graph_rewrite: what a rule returns is rewritten again, and there is nothing to rewrite
    in an accumulator; the walk takes a third of the time.) `ranges` (loop_ranges') gets the answers for
    every node met, old and new: the expanded kernel keeps most of the nodes, and a node's answer depends
    on nothing else, so linear_order adds only the rest."""
    ranges = {} if ranges is None else ranges
    nodes = toposort(kernel)
    ctx = {"accs": 0, "scopes": shared_scopes(nodes, ranges), "ranges": ranges}
    new: dict[UOp, UOp] = {}
    for u in nodes:
        src = tuple(new[s] for s in u.src)
        expanded = u if src == u.src else u.replace(src=src)
        new[u] = _accumulate(expanded, ctx) if u.op is Ops.REDUCE else expanded
    return new[kernel]


class LoopTree:
    """Which loop each loop is nested in, built from the END nodes that close them."""

    def __init__(self, nodes: list[UOp], ranges: dict[UOp, frozenset[UOp]]) -> None:
        self.parent: dict[UOp, Block] = {}
        self.depth: dict[Block, int] = {ROOT: 0}
        self._common: dict[tuple[Block, Block], Block] = {}
        self._innermost: dict[frozenset[UOp], Block] = {}
        for end in reversed([u for u in nodes if u.op is Ops.END]):  # outer loops before the loops inside them
            outer: Block = self.innermost(ranges[end], end)
            for r in end.src[1:]:
                self.place(r, outer, end)
                outer = r
        unclosed = [r for r in nodes if r.op is Ops.RANGE and r not in self.parent]
        if unclosed:
            raise LinearizeError(f"RANGE without END: loops {_names(unclosed)} are never closed")

    def place(self, r: UOp, parent: Block, end: UOp) -> None:
        if self.parent.get(r, parent) is not parent:
            raise LinearizeError(
                f"loop {_names([r])} is closed inside both {_names([self.parent[r]])} and {_names([parent])} "
                f"(at {end.src[0].op.name})"
            )
        self.parent[r] = parent
        self.depth[r] = self.depth[parent] + 1

    def path(self, b: Block) -> list[UOp]:
        """The loops open in block b, outermost first."""
        out = []
        while b is not None:
            out.append(b)
            b = self.parent[b]
        return out[::-1]

    def innermost(self, rs: frozenset[UOp], u: UOp) -> Block:
        """The deepest of the ranges `rs`; they must all lie on one chain of nested loops (kept: most nodes
        of a kernel are inside one of a few sets of loops)."""
        if rs not in self._innermost:
            self._innermost[rs] = self._deepest(rs, u)
        return self._innermost[rs]

    def _deepest(self, rs: frozenset[UOp], u: UOp) -> Block:
        if not rs:
            return ROOT
        unplaced = [r for r in rs if r not in self.depth]
        if unplaced:
            raise LinearizeError(f"{u.op.name} is inside loop {_names(unplaced)}, which no END closes around it")
        deepest = max(rs, key=lambda r: self.depth[r])
        if not rs <= set(self.path(deepest)):
            raise LinearizeError(
                f"cannot schedule {u.op.name}: it needs loops {_names(rs)} open at once, but they are not nested; "
                f"open loops at its deepest range: {_names(self.path(deepest))}"
            )
        return deepest

    def child_toward(self, b: Block, inner: Block) -> Block:
        """The loop directly inside b that contains block `inner` (or inner itself if it is b)."""
        while inner is not b:
            assert inner is not None
            if self.parent[inner] is b:
                return inner
            inner = self.parent[inner]
        return inner

    def common(self, a: Block, b: Block) -> Block:
        """The innermost loop around both blocks (kept: the same pairs come up once per edge of the graph)."""
        found = self._common.get((a, b))
        if found is None:
            pa = set(self.path(a))
            found = self._common[(a, b)] = next((r for r in reversed(self.path(b)) if r in pa), ROOT)
        return found


def _names(rs: Iterable[UOp | None]) -> str:
    return "[" + ", ".join("root" if r is None else f"{r.arg.kind.value}{r.arg.axis}" for r in rs) + "]"


def linear_order(kernel: UOp) -> list[UOp]:
    """The kernel's nodes in program order; a RANGE opens its loop, and an ENDRANGE closes it.

    Each node is placed in the innermost loop it depends on, and inside a block, statements and nested
    loops are ordered by their dependencies (ties keep graph order, which keeps the output readable).
    """
    ranges: dict[UOp, frozenset[UOp]] = {}
    kernel = expand_reduces(kernel, ranges)
    nodes = toposort(kernel)
    order = {u: i for i, u in enumerate(nodes)}
    loop_ranges(nodes, ranges)
    tree = LoopTree(nodes, ranges)
    block = {u: tree.parent[u] if u.op is Ops.RANGE else tree.innermost(ranges[u], u) for u in nodes}
    items: dict[Block, set[UOp]] = {}
    after: dict[UOp, set[UOp]] = {}  # item -> the items of its block that must come after it
    for u in nodes:
        items.setdefault(block[u], set()).add(u)
        for s in u.src:
            if block[s] is block[u]:  # most edges: both ends in one block, no loop between them
                first, then = s, u
            else:
                b = tree.common(block[s], block[u])
                first, then = _item(tree, block, s, b), _item(tree, block, u, b)
            if first is not then:
                after.setdefault(first, set()).add(then)
    for read, update in _reads_before_updates(nodes):
        b = tree.common(block[read], block[update])
        first, then = _item(tree, block, read, b), _item(tree, block, update, b)
        if first is not then:
            after.setdefault(first, set()).add(then)
    return _emit(items, after, order, tree)


def _reads_before_updates(nodes: list[UOp]) -> list[tuple[UOp, UOp]]:
    """(read, update) pairs: a node that reads an accumulator sees its value from before the iteration's
    update, so it comes first. Nothing else orders them: the update does not read the reader. (A reduction's
    accumulator has no readers; a recurrence's has, as online softmax's running max read by the rescaling.)"""
    updates: dict[UOp, list[UOp]] = {}
    for u in nodes:
        if u.op is Ops.ACCUMULATE:
            updates.setdefault(u.src[0], []).append(u)
    return [
        (u, w)
        for u in nodes
        for s in u.src
        if s in updates and not (u.op is Ops.ACCUMULATE and u.src[0] is s)
        for w in updates[s]
    ]


def _item(tree: LoopTree, block: dict[UOp, Block], u: UOp, b: Block) -> UOp:
    """What stands for `u` in block b: u itself, or the loop of b that u is inside."""
    if block[u] is b:
        return u
    loop = tree.child_toward(b, block[u])
    assert loop is not None
    return loop


def _schedule(
    b: Block, members: set[UOp], after: dict[UOp, set[UOp]], order: dict[UOp, int], tree: LoopTree
) -> list[UOp]:
    """Kahn's algorithm over the items of block b, smallest graph position first."""
    waiting = dict.fromkeys(members, 0)
    for u in members:
        for v in after.get(u, ()):
            if v in waiting:
                waiting[v] += 1
    ready = [(order[u], u) for u, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, u = heapq.heappop(ready)
        out.append(u)
        for v in after.get(u, ()):
            if v in waiting:
                waiting[v] -= 1
                if waiting[v] == 0:
                    heapq.heappush(ready, (order[v], v))
    if len(out) != len(members):
        stuck = sorted((u for u in members if u not in out), key=order.__getitem__)
        raise LinearizeError(
            f"schedule cannot be completed: stuck nodes {[u.op.name for u in stuck[:8]]} wait on each other; "
            f"open loops: {_names(tree.path(b))}"
        )
    return out


def _emit(items: dict[Block, set[UOp]], after: dict[UOp, set[UOp]], order: dict[UOp, int], tree: LoopTree) -> list[UOp]:
    """Walk the blocks depth-first without recursion: a loop's contents go between its RANGE and ENDRANGE."""
    program: list[UOp] = []
    work: list[UOp] = []  # items still to emit, in reverse; an ENDRANGE marks where a loop closes
    work += reversed(_schedule(ROOT, items.get(ROOT, set()), after, order, tree))
    while work:
        u = work.pop()
        if u.op is Ops.SINK:
            continue
        program.append(u)
        if u.op is Ops.RANGE:
            work.append(UOp(Ops.ENDRANGE, dtypes.void, (u,)))
            work += reversed(_schedule(u, items.get(u, set()), after, order, tree))
    return program


def linearize(kernel: Kernel) -> LinearProgram:
    """The arrow from a kernel to its program: the kernel's opts applied, its nodes put in program order, and
    the facts a renderer decides by: the reduce axes its loads stride along (what to vectorize) and the
    outputs it may write around the cache."""
    return linearize_optimized(kernel, apply_opts(kernel.ast, kernel.opts))


def linearize_optimized(kernel: Kernel, ast: UOp) -> LinearProgram:
    """linearize's second half: `ast` is the kernel's graph with its opts applied already (the driver times
    the two halves apart)."""
    order = tuple(linear_order(ast))
    streamed = streamed_slots(ast)
    return LinearProgram(kernel.name, kernel.params, kernel.written, order, strided_axes(ast), streamed=streamed)
