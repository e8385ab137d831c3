"""Chapter 1: a deep graph defeats a recursive walk, and the iterative toposort does not care."""

import sys

from uopc.ir import UOp, param, toposort


# --8<-- [start:recursive]
def count_recursive(u: UOp, seen: set[UOp]) -> int:
    """The obvious depth-first count of distinct nodes: one Python frame per level of the graph."""
    if u in seen:
        return 0
    seen.add(u)
    return 1 + sum(count_recursive(s, seen) for s in u.src)


# --8<-- [end:recursive]

# --8<-- [start:deep]
x = param(0)
for _ in range(20_000):  # a long chain, as a loop unrolled by the optimizer or a deep network produces
    x = x + 1
print("Python's recursion limit:", sys.getrecursionlimit())
try:
    count_recursive(x, set())
except RecursionError as e:
    print("recursive count:", type(e).__name__, "-", e)
print("toposort:", len(toposort(x)), "nodes")
# --8<-- [end:deep]
