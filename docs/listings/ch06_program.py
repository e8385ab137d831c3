"""Chapter 6: the linearized program: RANGE opens a loop, ENDRANGE closes it, every node in its block."""

from uopc.ir import AxisType, Ops, UOp, toposort
from uopc.lower import linear_order, rangeify


def loop_name(r: UOp) -> str:
    return {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(r.arg.kind, "idx") + str(r.arg.axis)


x = UOp.buffer(0, 3).reshape((3, 1)).expand((3, 4))
y = UOp.buffer(1, 12).reshape((3, 4))
kernel = rangeify([(UOp.buffer(2, 12), x * y)])
names = {u: f"%{n}" for n, u in enumerate(u for u in toposort(kernel) if u.op is not Ops.CONST)}  # as in to_uir

# --8<-- [start:program]
depth = 0
for u in linear_order(kernel):
    depth -= u.op is Ops.ENDRANGE
    what = loop_name(u) if u.op is Ops.RANGE else loop_name(u.src[0]) if u.op is Ops.ENDRANGE else names.get(u, u.arg)
    print("  " * depth + f"{u.op.name} {what}")
    depth += u.op is Ops.RANGE
# --8<-- [end:program]
