"""Chapter 3: index expressions written in different ways simplify to the same object."""

from uopc.ir import UOp, range_, simplify, to_uir

# --8<-- [start:same]
i, j = range_(4, 0), range_(3, 1)
spellings: list[UOp] = [
    i * 3 + j,
    j + 3 * i,
    (i + 1) * 3 + j - 3,
    i * 2 + j + i,
    (j - i) + i * 4,
]
canonical = [simplify(e) for e in spellings]
print("all the same object:", all(c is canonical[0] for c in canonical))
print(to_uir(canonical[0]), end="")
# --8<-- [end:same]
