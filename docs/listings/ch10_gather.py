"""Chapter 10: ops without an op of their own. gather, cumsum and sort are comparisons, selects and sums,
each one kernel; checked against numpy."""

import numpy as np

from uopc.lower import make_plan, normalize
from uopc.tensor import Tensor


def kernels(t: Tensor) -> int:
    """How many kernels the plan that computes t has."""
    graph, _ = normalize([t.uop])
    return len(make_plan(graph).kernels)


# --8<-- [start:gather]
x = np.array([[10.0, 11.0, 12.0, 13.0], [20.0, 21.0, 22.0, 23.0], [30.0, 31.0, 32.0, 33.0]], np.float32)
idx = np.array([[3, 0], [1, 1], [0, 2]])
picked = Tensor(x).gather(1, Tensor(idx))
print("ops in its graph:", ", ".join(sorted({u.op.name for u in picked.uop.toposort()})))
print("kernels:", kernels(picked))
print(picked.numpy().tolist(), "| numpy:", np.take_along_axis(x, idx, 1).tolist())
print("x[[2, 0], 1:]:", Tensor(x)[[2, 0], 1:].numpy().tolist())
# --8<-- [end:gather]

# --8<-- [start:cumsum-sort]
a = np.array([3.0, -1.0, np.nan, 2.0, -1.0], np.float32)
running, (values, order) = Tensor(a).cumsum(0), Tensor(a).sort()
print(f"kernels: cumsum {kernels(running)}, sort {kernels(values)}")  # counted before they run
print("cumsum:", running.numpy().tolist())
print("sort:  ", values.numpy().tolist(), "order:", order.numpy().tolist())
print("numpy: ", np.sort(a).tolist(), "order:", np.argsort(a, kind="stable").tolist())
# --8<-- [end:cumsum-sort]
