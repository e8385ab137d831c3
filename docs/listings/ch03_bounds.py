"""Chapter 3: vmin and vmax, interval bounds computed from the leaves up."""

from uopc.ir import UOp, bounds, dtypes, param, range_

# --8<-- [start:bounds]
i, j = range_(4, 0), range_(3, 1)  # i in [0, 3], j in [0, 2]
n = param(0, dtypes.int32)  # an input: anything an int32 holds
exprs: list[tuple[str, UOp]] = [
    ("i", i),
    ("i*3 + j", i * 3 + j),
    ("i - j", i - j),
    ("(i - 2) * (j - 1)", (i - 2) * (j - 1)),
    ("(i*3 + j) // 3", (i * 3 + j) // 3),
    ("(i*3 + j) % 5", (i * 3 + j) % 5),
    ("(j + 4) % 4", (j + 4) % 4),
    ("i < 4", i < 4),
    ("i.maximum(2)", i.maximum(2)),
    ("n", n),
    ("n % 8", n % 8),
    ("n * 2", n * 2),
    ("i + (2**31 - 4)", i + (2**31 - 4)),
    ("i + (2**31 - 3)", i + (2**31 - 3)),
]
for text, e in exprs:
    lo, hi = bounds(e)
    print(f"{text:<18} [{lo}, {hi}]")
# --8<-- [end:bounds]
