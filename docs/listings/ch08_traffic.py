"""Chapter 8: why not one kernel per op? Bytes read and written by GELU, op by op and fused."""

import numpy as np

from uopc.ir import Ops, UOp
from uopc.lower import Plan, make_plan, normalize
from uopc.tensor import Tensor


# --8<-- [start:traffic]
def per_op_bytes(graph: UOp) -> tuple[int, int]:
    """(ops, bytes) if every ALU op were its own kernel: it reads each array operand and writes its result."""
    ops = [u for u in graph.toposort() if u.op in Ops.ALU]
    arrays = [sum(1 for s in u.src if s.shape) + 1 for u in ops]  # scalar constants are compiled in
    return len(ops), sum(n * u.size * u.scalar_dtype.itemsize for n, u in zip(arrays, ops, strict=True))


def plan_bytes(plan: Plan) -> int:
    """What the plan's kernels read and write: each parameter of each kernel, once."""
    return sum(p.size * p.dtype.itemsize for k in plan.kernels for p in k.params)


x = Tensor(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
graph, _ = normalize([x.gelu("tanh").uop])
ops, separate = per_op_bytes(graph)
plan = make_plan(graph, opt=False)
print(f"GELU of a 512 x 512 float32 array ({x.numel() * 4:,} bytes)")
print(f"  one kernel per op: {ops} kernels, {separate:>10,} bytes read and written")
print(f"  kernelize:         {len(plan.kernels)} kernel,  {plan_bytes(plan):>10,} bytes read and written")
# --8<-- [end:traffic]
