"""kernelize: cut a tensor graph into kernels, and cache the resulting plan by the graph's structure.

A tensor program is one big shaped graph. Computing it node by node would write every intermediate to
memory; computing it as one loop nest is impossible once a reduction's result is broadcast back (each
output element would recompute the whole reduction). kernelize decides which nodes are *materialized*
(written to a buffer of their own): the outputs, explicit CONTIGUOUS nodes, and the source of any EXPAND
that computes something (a reduction, or arithmetic), since an expand would recompute it once per copy.
Everything else fuses into the kernel that consumes it. Outputs of one shape that only do elementwise work
share one kernel, with one store each.

A plan (kernels, buffers, call order) depends only on the graph's structure: buffers are numbered by
first use, so a training step that repeats on new data finds its plan in the cache and compiles nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from uopc.ir import BufferArg, ConstValue, DType, Ops, UOp, round_to, sink, substitute, toposort
from uopc.lower.opt import Opts, choose_opts
from uopc.lower.pack import PACK_MIN_WORK, Packable, copy_opts, pack_kernel, pack_matmul
from uopc.lower.rangeify import Memo, rangeify
from uopc.lower.stages import BufferSpec, Kernel, Plan, Step

_CHEAP = (Ops.BUFFER, Ops.CONST)


def normalize(roots: Sequence[UOp], computed: Mapping[UOp, UOp] | None = None) -> tuple[UOp, list[UOp]]:
    """The roots with every BUFFER renumbered by first use and DETACH removed, and the original buffers.

    Two graphs that differ only in which buffers they read normalize to the same node: the plan cache key.
    A subgraph found in `computed` (a graph computed before -> the small graph of the buffer holding its
    value) is read from that buffer instead of being walked and computed again.
    """
    done = computed or {}
    graph = _read_nothing_empty(sink(*roots))
    inputs: list[UOp] = []
    new: dict[UOp, UOp] = {}
    # one pass, sources first: each node is rebuilt from rebuilt sources; a computed subgraph is not entered
    for u in toposort(graph, lambda x: done[x].toposort() if x in done else x.src):
        if u.op is Ops.BUFFER:
            new[u] = UOp(Ops.BUFFER, u.dtype, (), BufferArg(len(inputs), u.arg.size))
            inputs.append(u)
        elif u in done:
            new[u] = new[done[u]]
        elif u.op is Ops.DETACH:  # the gradient is built already: a DETACH is now just its source
            new[u] = new[u.src[0]]
        else:
            src = tuple(new[s] for s in u.src)
            new[u] = u if src == u.src else u.replace(src=src)
    return new[graph], inputs


def _read_nothing_empty(graph: UOp) -> UOp:
    """The graph with each node that has elements but reads none (a reduction over an axis of size 0, a pad
    of an empty tensor) replaced by the constant it is: the reduction's identity, or the padding's 0. Zero-size
    tensors then never reach a kernel (a result of size 0 is not computed at all)."""
    if all(u.size for u in graph.toposort() if u.op is not Ops.SINK):
        return graph
    new: dict[UOp, UOp] = {}
    for u in graph.toposort():
        src = tuple(new[s] for s in u.src)
        if u.op is not Ops.SINK and u.size and any(s.size == 0 for s in u.src):
            value = _IDENTITY[u.arg[0]](u.scalar_dtype) if u.op is Ops.REDUCE_AXIS else 0
            constant = UOp.const(round_to(u.scalar_dtype, value), u.scalar_dtype)
            new[u] = constant.reshape((1,) * len(u.shape)).expand(u.shape) if u.shape else constant
        else:
            new[u] = u if src == u.src else u.replace(src=src)
    return new[graph]


_IDENTITY: dict[Ops, Callable[[DType], ConstValue]] = {
    Ops.ADD: lambda dt: 0,
    Ops.MUL: lambda dt: 1,
    Ops.MAX: lambda dt: dt.min,  # -inf for floats, False for bools
    Ops.MIN: lambda dt: dt.max,
}


def _through_movement(u: UOp) -> UOp:
    while u.op in Ops.MOVEMENT:
        u = u.src[0]
    return u


def materialized(graph: UOp) -> list[UOp]:
    """The nodes that get a buffer of their own, in graph order (sources first)."""
    roots = set(graph.src)
    chosen = {u for u in roots if u.op is not Ops.BUFFER}
    for u in graph.toposort():
        if u.op is Ops.CONTIGUOUS:
            chosen.add(u)
        if u.op is Ops.EXPAND and u.size > u.src[0].size:
            source = _through_movement(u.src[0])
            if source.op not in _CHEAP:  # an expand of computed values would recompute them per copy
                chosen.add(source)
    while shared := _shared_work(chosen, {u for u in graph.toposort() if u.op is Ops.BUFFER}):
        chosen |= shared
    return [u for u in graph.toposort() if u in chosen]


_LIBM = frozenset({Ops.EXP, Ops.LOG, Ops.SIN, Ops.COS, Ops.POW})
"""Ops that are calls into libm, which gcc does not vectorize: tens of cycles an element, where a load from
cache is one."""


def _shared_work(chosen: set[UOp], buffers: set[UOp]) -> set[UOp]:
    """Reductions that two kernels would each compute (a gradient read by Adam's m, v and update, say), and
    libm calls that two kernels would each make (a softmax's exp, which its sum, its division and its
    gradient read): computed once into a buffer, and loaded. Elementwise outputs of one shape count as one
    kernel, as group_outputs mostly makes them, computing a value they share once."""
    boundaries = chosen | buffers
    count: dict[UOp, int] = {}
    kernels: dict[UOp, set[object]] = {}
    for m in chosen:
        region = _region(m, boundaries)
        kernel: object = m if _has_reduce(m, region, boundaries) else m.shape
        for u in region:
            if u.op is Ops.REDUCE_AXIS and u not in boundaries:
                count[u] = count.get(u, 0) + 1
            if u.op in _LIBM and u not in boundaries:
                kernels.setdefault(u, set()).add(kernel)
    return {u for u, n in count.items() if n > 1} | {u for u, k in kernels.items() if len(k) > 1}


def _region(m: UOp, boundaries: set[UOp]) -> list[UOp]:
    """The nodes computed inside m's kernel: everything below m up to the boundaries (which are loaded)."""
    return toposort(m, lambda u: [] if u is not m and u in boundaries else u.src)


def _has_reduce(m: UOp, region: list[UOp], boundaries: set[UOp]) -> bool:
    """Whether m's kernel reduces: a REDUCE_AXIS computed inside it (a loaded one does not count)."""
    return any(u.op is Ops.REDUCE_AXIS and (u is m or u not in boundaries) for u in region)


@dataclass
class _Group:
    members: list[UOp]
    shape: tuple[int, ...]
    elementwise: bool
    work: int = 0  # a reducing group's multiply-adds (or other reduce steps): the largest reduce it computes
    loaded: set[UOp] = field(default_factory=set)  # the members a later group reads from memory


def group_outputs(order: list[UOp], boundaries: set[UOp]) -> list[_Group]:
    """Kernels as groups of materialized nodes, in a valid execution order.

    Elementwise outputs of one shape join one kernel, unless that would make the kernel wait for one of
    its own outputs through another kernel; a member may read another member, which is then computed
    inline (once, as a shared subexpression) instead of loaded. An elementwise output that reads a small
    reduction element for element (an optimizer's update of a parameter from its gradient) joins the
    reduction's kernel as its epilogue (see _epilogue_of).
    """
    groups: list[_Group] = []
    group_of: dict[UOp, int] = {}
    needs: dict[UOp, set[int]] = {}  # materialized node -> every group it transitively waits on
    for m in order:
        region = _region(m, boundaries)
        deps = [u for u in region if u is not m and u in group_of]
        needs[m] = set().union(*({group_of[d]} | needs[d] for d in deps))
        elementwise = not _has_reduce(m, region, boundaries)
        reads = {group_of[d] for d in deps}
        target = next(
            (
                i
                for i, g in enumerate(groups)
                if elementwise and _fits(m, region, g, i in reads) and _may_join(i, deps, group_of, needs)
            ),
            None,
        )
        if target is None:
            work = 0 if elementwise else max(_reduce_work(u, m, boundaries) for u in region)
            groups.append(_Group([], m.shape, elementwise, work))
            target = len(groups) - 1
        groups[target].members.append(m)
        group_of[m] = target
        for d in deps:
            if group_of[d] != target:
                groups[group_of[d]].loaded.add(d)
    return groups


def _reduce_work(u: UOp, m: UOp, boundaries: set[UOp]) -> int:
    """The steps of reduction u if m's kernel computes it (a loaded one costs none): its source's elements."""
    return u.src[0].size if u.op is Ops.REDUCE_AXIS and (u is m or u not in boundaries) else 0


def _fits(m: UOp, region: list[UOp], g: _Group, reads_g: bool) -> bool:
    """Whether elementwise output m may share group g's kernel: g is elementwise of m's shape, or m reads
    g's small reduction and is an epilogue of it."""
    if g.elementwise:
        return g.shape == m.shape
    return reads_g and g.work < EPILOGUE_MAX_WORK and _epilogue_of(m, region, g)


EPILOGUE_MAX_WORK = PACK_MIN_WORK
"""The largest reduction an elementwise epilogue joins. A larger one is a matmul that pack.py packs, and a
packed matmul stores one output; its own kernel costs little beside it. For a smaller one (a bias's or a
small weight's gradient) the epilogue saves a kernel, a buffer and the gradient's trip through it: little
time inside a plan's one call into C (notes 146), and nothing is lost."""


def _epilogue_of(m: UOp, region: list[UOp], g: _Group) -> bool:
    """Whether m reads the members of reducing group g only element for element: every path from m down to a
    member is elementwise math of m's shape, reaching the member directly (a member of m's shape) or through
    one reshape of it (of as many elements). Then element i of m needs element i of the members alone, and
    one loop nest computes them all, the reduction once; a permute or an expand on the way would make m read
    other elements of the reduction, which the kernel would compute again."""
    members = set(g.members)
    if any(r.size != m.size for r in members):
        return False
    reaches: set[UOp] = set(members)
    for u in region:  # sources first
        if u in members or not any(s in reaches for s in u.src):
            continue
        reaches.add(u)
        if u.shape != m.shape:
            return False
        if u.op is Ops.RESHAPE and u.src[0] not in members:
            return False
        elementwise = u.op in Ops.ALU or u.op is Ops.CAST
        if u.op is not Ops.RESHAPE and (not elementwise or any(s in members and s.shape != m.shape for s in u.src)):
            return False
    return True


def _may_join(i: int, deps: list[UOp], group_of: dict[UOp, int], needs: dict[UOp, set[int]]) -> bool:
    """A node may join group i if none of its inputs comes from a later group, or waits on group i."""
    return all(group_of[d] == i or (group_of[d] < i and i not in needs[d]) for d in deps)


def _kernel_name(shape: tuple[int, ...], reduces: bool, taken: set[str]) -> str:
    base = ("r_" if reduces else "E_") + "_".join(map(str, shape or (1,)))
    name, n = base, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a plan is made or built, and as it was before afterwards.

    Making a plan allocates a hundred thousand objects (nodes, their sources, memo entries), nearly all of
    them kept: hash consing shares the nodes, and the plan holds its kernels. The collector runs every 700
    allocations and walks the young objects again and again as they age, finding no garbage: a sixth of
    the CPU time of a GPT step's first step (notes 121). A cycle made meanwhile waits for the next collection."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@collector_paused()
def make_plan(graph: UOp, opt: bool = True, pack: int = 0) -> Plan:
    """The plan for a normalized graph (see `normalize`): one kernel per group of materialized nodes, each
    with the opts `choose_opts` picks for it (none if `opt` is off). With `opt` and `pack` (the CPU threads
    the plan will run on, 0 for none), a large matmul reads copies of its operands packed into panels, each
    made by a kernel of its own, the panels as wide as suits that many threads (pack.py)."""
    n_inputs = sum(1 for u in graph.toposort() if u.op is Ops.BUFFER)
    buffers = [
        BufferSpec(u.scalar_dtype, u.arg.size)
        for u in sorted((u for u in graph.toposort() if u.op is Ops.BUFFER), key=lambda b: b.arg.slot)
    ]
    where: dict[UOp, int] = {u: u.arg.slot for u in graph.toposort() if u.op is Ops.BUFFER}
    outputs = []
    for root in graph.src:  # an input returned as it is keeps its buffer; anything else gets a new one
        if root not in where:
            where[root] = len(buffers)
            buffers.append(BufferSpec(root.scalar_dtype, root.size))
        outputs.append(where[root])
    order = materialized(graph)
    boundaries = set(order) | {u for u in graph.toposort() if u.op is Ops.BUFFER}
    groups = group_outputs(order, boundaries)
    # a member no other kernel reads (a gradient its update's kernel computes) is not stored: it has no buffer
    stored = set().union(*(g.loaded for g in groups))
    for m in order:
        if m not in where and m in stored:
            where[m] = len(buffers)
            buffers.append(BufferSpec(m.scalar_dtype, m.size))
    kernels: list[Kernel] = []
    steps: list[Step] = []
    names: set[str] = set()
    memo = _PlanMemo()
    for group in groups:
        ast, plan_buffers = _lower_group(group, boundaries, where, memo)
        name = _kernel_name(group.shape, not group.elementwise, names)
        packing = pack_matmul(ast, pack) if opt and pack else None
        if packing is None:
            kernels.append(Kernel(name, ast, choose_opts(ast) if opt else Opts()))
        else:
            for copy in packing.copies:
                plan_buffers = _schedule_copy(copy, plan_buffers, buffers, kernels, steps, names)
            kernels.append(Kernel(name, packing.kernel, packing.opts))
        steps.append(Step(len(kernels) - 1, plan_buffers))
    made = tuple(kernels)
    return Plan(tuple(steps), tuple(buffers), n_inputs, tuple(outputs), make_kernels=lambda: made)


def _schedule_copy(
    p: Packable,
    plan_buffers: tuple[int, ...],
    buffers: list[BufferSpec],
    kernels: list[Kernel],
    steps: list[Step],
    names: set[str],
) -> tuple[int, ...]:
    """Add the copy that packs a matmul's operand (pack.py), into a plan buffer of its own, as a step before
    the matmul; return the matmul's plan buffers, the copy's in the operand's slot."""
    slot = p.load.src[0].arg.slot
    buffers.append(BufferSpec(p.load.scalar_dtype, p.size))
    copy = pack_kernel(p)
    kernels.append(Kernel(_kernel_name(p.blocks, False, names), copy, copy_opts(copy)))
    steps.append(Step(len(kernels) - 1, (plan_buffers[slot], len(buffers) - 1)))
    return tuple(len(buffers) - 1 if i == slot else b for i, b in enumerate(plan_buffers))


@dataclass
class _PlanMemo:
    """What one make_plan keeps from one kernel to the next, and drops when it returns: simplify's memo
    (rangeify.Memo), and the kernel lowered for each group's values: a model's repeated layers give groups
    whose values are the same graph over the same local buffers (nodes are hash-consed, so the same
    object), and their kernel is lowered once."""

    simplified: Memo = field(default_factory=dict)
    kernels: dict[tuple[tuple[UOp, UOp], ...], tuple[UOp, tuple[int, ...]]] = field(default_factory=dict)


def _lower_group(
    group: _Group, boundaries: set[UOp], where: dict[UOp, int], memo: _PlanMemo
) -> tuple[UOp, tuple[int, ...]]:
    """The kernel graph for one group, with its parameters numbered 0.. and the plan buffer of each."""
    members = set(group.members)
    inner = boundaries - members
    local: dict[int, UOp] = {}  # plan buffer -> the BUFFER node standing for it inside the kernel

    def param(plan_buffer: int, like: UOp) -> UOp:
        if plan_buffer not in local:
            local[plan_buffer] = UOp(Ops.BUFFER, like.scalar_dtype, (), BufferArg(len(local), like.size))
        return local[plan_buffer]

    outputs = [
        (param(where[m], m), m if m.shape == group.shape else m.reshape(group.shape))
        for m in group.members
        if m in where  # a member read only inside this kernel has no buffer
    ]
    loads = {
        u: param(where[u], u).reshape(u.shape) if u.shape != (u.size,) else param(where[u], u)
        for m in group.members
        for u in _region(m, inner)
        if u in inner
    }
    values = tuple((dest, _with_loads(m, loads)) for dest, m in outputs)
    if values not in memo.kernels:
        memo.kernels[values] = _kernel(values, memo.simplified)
    kernel, used = memo.kernels[values]
    by_slot = {b.arg.slot: plan_buffer for plan_buffer, b in local.items()}
    return kernel, tuple(by_slot[old] for old in used)


def _with_loads(m: UOp, loads: dict[UOp, UOp]) -> UOp:
    """m's graph with each node of `loads` replaced by its load; the walk stops there, so it stays inside
    m's kernel instead of walking the whole graph below it."""
    new: dict[UOp, UOp] = {}
    for u in toposort(m, lambda x: () if x in loads else x.src):
        if u in loads:
            new[u] = loads[u]
            continue
        src = tuple(new[s] for s in u.src)
        new[u] = u if src == u.src else u.replace(src=src)
    return new[m]


def _kernel(values: tuple[tuple[UOp, UOp], ...], simplified: Memo) -> tuple[UOp, tuple[int, ...]]:
    """The kernel that stores `values`, its parameters renumbered 0.. in slot order, and the old slot of each."""
    kernel = rangeify(values, simplified)
    used = sorted({u.arg.slot for u in kernel.toposort() if u.op is Ops.DEFINE_GLOBAL})
    renumber = {old: new for new, old in enumerate(used)}
    kernel = substitute(
        kernel,
        {
            u: UOp.define_global(renumber[u.arg.slot], u.arg.size, u.scalar_dtype)
            for u in kernel.toposort()
            if u.op is Ops.DEFINE_GLOBAL and renumber[u.arg.slot] != u.arg.slot
        },
    )
    return kernel, tuple(used)


class PlanCache:
    """Plans by normalized graph (and optimizer setting), the least recently used dropped beyond `size`.
    Counts how many it made, and how many it was given (plans restored from a plan store), for tests and
    DEBUG."""

    def __init__(self, size: int = 256) -> None:
        self.plans: OrderedDict[tuple[UOp, bool, int], Plan] = OrderedDict()
        self.size, self.made, self.restored = size, 0, 0

    def get(self, graph: UOp, opt: bool, pack: int = 0) -> tuple[Plan, bool]:
        """The plan for `graph` (made with make_plan's `opt` and `pack`), and whether it was new."""
        found = self.find(graph, opt, pack)
        if found is not None:
            return found, False
        self.made += 1
        return self._add((graph, opt, pack), make_plan(graph, opt, pack)), True

    def find(self, graph: UOp, opt: bool, pack: int = 0) -> Plan | None:
        """The plan for `graph` if it is here; makes nothing."""
        key = (graph, opt, pack)
        found = self.plans.get(key)
        if found is not None:
            self.plans.move_to_end(key)
        return found

    def add_restored(self, graph: UOp, opt: bool, plan: Plan, pack: int = 0) -> None:
        """Keep a plan restored from a plan store, as if it had been made here."""
        self.restored += 1
        self._add((graph, opt, pack), plan)

    def _add(self, key: tuple[UOp, bool, int], plan: Plan) -> Plan:
        self.plans[key] = plan
        if len(self.plans) > self.size:
            self.plans.popitem(last=False)
        return plan
