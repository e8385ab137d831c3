"""Chapter 6: which loops each node needs, and the block it is placed in: the innermost of them."""

from uopc.ir import AxisType, Ops, UOp, toposort
from uopc.lower import rangeify
from uopc.lower.linearize import LoopTree, loop_ranges


def loop_name(r: UOp) -> str:
    return {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(r.arg.kind, "idx") + str(r.arg.axis)


x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))
y = UOp.buffer(1, 12).reshape((3, 4))
kernel = rangeify([(UOp.buffer(2, 12), x * y)])

# --8<-- [start:blocks]
nodes = toposort(kernel)
ranges = loop_ranges(nodes)
tree = LoopTree(nodes, ranges)
names = {u: f"%{n}" for n, u in enumerate(u for u in nodes if u.op is not Ops.CONST)}  # as to_uir numbers them
for u, name in names.items():
    needs = ", ".join(sorted(loop_name(r) for r in ranges[u]))
    block = tree.innermost(ranges[u], u) if u.op is not Ops.RANGE else tree.parent[u]
    where = "root" if block is None else loop_name(block)
    print(f"{name:<4} {u.op.name:<13} needs [{needs}]".ljust(40), "lives in", where)
# --8<-- [end:blocks]
