"""Chapter 1: what a cache keyed on raw args would get wrong, and what uopc's key gets right."""

import math

from uopc.ir import Ops, UOp, dtypes, run

# --8<-- [start:naive-cache]
naive: dict[tuple[object, ...], str] = {}
naive[(Ops.CONST, dtypes.float32, (), 0.0)] = "the node for 0.0"
print("naive cache asked for -0.0 finds:", naive.get((Ops.CONST, dtypes.float32, (), -0.0)))
print("UOp.const(0.0) is UOp.const(-0.0):", UOp.const(0.0) is UOp.const(-0.0))
print("1.0 / 0.0  =", run(1.0 / UOp.const(0.0)).arg)
print("1.0 / -0.0 =", run(1.0 / UOp.const(-0.0)).arg)
print("UOp.const(nan) is UOp.const(nan):", UOp.const(math.nan) is UOp.const(math.nan))
# --8<-- [end:naive-cache]
