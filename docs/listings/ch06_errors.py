"""Chapter 6: kernels linear_order refuses (the ordering inside linearize), and what LinearizeError says about each."""

from uopc.ir import AxisType, Ops, UOp, dtypes, range_, sink
from uopc.lower import LinearizeError, linear_order

out = UOp.define_global(0, 12)
i, j = range_(4, 0), range_(3, 1)

# --8<-- [start:never-closed]
no_end = sink(out.store(i * 3 + j, UOp.const(1.0)))  # no END at all: where would the loops close?
half_closed = sink(out.store(i * 3 + j, UOp.const(1.0)).end(i))  # the END closes i; nothing closes j
# --8<-- [end:never-closed]
# --8<-- [start:two-parents]
two_parents = sink(
    out.store(i * 3 + j, UOp.const(1.0)).end(i, j),  # j inside i
    out.store(j * 4 + i, UOp.const(2.0)).end(j, i),  # i inside j
)
# --8<-- [end:two-parents]
# --8<-- [start:stuck]
# Two reductions over r1 with a reduction over r2 between them: loop r1 must run both before loop r2
# (to finish `first`) and after it (to use `middle`). One RANGE is one loop, so no order exists.
a, b, total = UOp.define_global(1, 4), UOp.define_global(2, 4), UOp.define_global(3, 1)
r1, r2 = range_(4, 2, AxisType.REDUCE), range_(4, 3, AxisType.REDUCE)
first = UOp(Ops.REDUCE, dtypes.float32, (a.load(r1), r1), Ops.ADD)
middle = UOp(Ops.REDUCE, dtypes.float32, (b.load(r2) + first, r2), Ops.ADD)
last = UOp(Ops.REDUCE, dtypes.float32, (a.load(r1) * middle, r1), Ops.ADD)
stuck = sink(total.store(UOp.const(0), last))
# --8<-- [end:stuck]
# --8<-- [start:report]
for name, kernel in [("no END", no_end), ("half closed", half_closed), ("two parents", two_parents), ("stuck", stuck)]:
    try:
        linear_order(kernel)
    except LinearizeError as e:
        print(f"{name + ':':<14}{e}")
# --8<-- [end:report]
