"""Chapter 5: row-major offsets. flat_index writes them as index arithmetic, and numpy's strides agree."""

import numpy as np

from uopc.ir import Ops, UOp, range_, toposort
from uopc.lower.rangeify import flat_index


def infix(root: UOp, names: str) -> str:
    """An index expression as infix text, the loop over axis n named names[n]."""
    symbol = {Ops.ADD: "+", Ops.MUL: "*"}
    text: dict[UOp, str] = {}
    for u in toposort(root):
        if u.op is Ops.RANGE:
            text[u] = names[u.arg.axis]
        elif u.op is Ops.CONST:
            text[u] = str(u.arg)
        else:
            a, b = (text[s] for s in u.src)
            text[u] = f"({a} {symbol[u.op]} {b})"
    return text[root]


# --8<-- [start:offsets]
i, j, k = range_(2, 0), range_(3, 1), range_(4, 2)
print("offset of (i, j, k) in a 2 x 3 x 4 array:", infix(flat_index((i, j, k), (2, 3, 4)), "ijk"))

a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
print("numpy's strides, in elements:", tuple(s // a.itemsize for s in a.strides))
print("a[1, 2, 3] =", a[1, 2, 3], "and the flat buffer holds", a.reshape(-1)[1 * 12 + 2 * 4 + 3], "at 23")

t = a.transpose(2, 0, 1)  # a view: same buffer, strides permuted
print("a.transpose(2, 0, 1): strides", tuple(s // t.itemsize for s in t.strides), "C-contiguous:", t.flags.c_contiguous)
# --8<-- [end:offsets]
