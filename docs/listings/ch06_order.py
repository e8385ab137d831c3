"""Chapter 6: a kernel graph has only a topological order; linearize gives it loops and places each node."""

from uopc.ir import AxisType, Ops, UOp, to_uir, toposort
from uopc.lower import linearize, rangeify
from uopc.lower.linearize import LoopTree, loop_ranges


def loop_name(r: UOp) -> str:
    return {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(r.arg.kind, "idx") + str(r.arg.axis)


# --8<-- [start:kernel]
x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))  # x[i], the same for every j
y = UOp.buffer(1, 12).reshape((3, 4))
kernel = rangeify([(UOp.buffer(2, 12), x * y)])  # out[i, j] = x[i] * y[i, j]
print(to_uir(kernel), end="")
# --8<-- [end:kernel]
print()
# --8<-- [start:blocks]
nodes = toposort(kernel)
ranges = loop_ranges(nodes)
tree = LoopTree(nodes, ranges)
names = {u: f"%{n}" for n, u in enumerate(u for u in nodes if u.op is not Ops.CONST)}  # as to_uir numbers them
for u in names:
    needs = sorted(loop_name(r) for r in ranges[u])
    block = tree.innermost(ranges[u], u) if u.op is not Ops.RANGE else tree.parent[u]
    print(f"{names[u]:<4} {u.op.name:<13} needs {str(needs):<18} lives in {'root' if block is None else loop_name(block)}")
# --8<-- [end:blocks]
print()
# --8<-- [start:program]
depth = 0
for u in linearize(kernel):
    depth -= u.op is Ops.ENDRANGE
    what = loop_name(u) if u.op is Ops.RANGE else loop_name(u.src[0]) if u.op is Ops.ENDRANGE else names.get(u, u.arg)
    print("  " * depth + f"{u.op.name} {what}")
    depth += u.op is Ops.RANGE
# --8<-- [end:program]
