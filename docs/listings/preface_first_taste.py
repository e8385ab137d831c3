"""Preface: a first taste of the IR. Build an index expression, print it, simplify it, evaluate a program."""

from uopc.ir import range_, run, simplify, stack, to_python, to_uir

# --8<-- [start:taste]
# Element (i, j) of a 4 x 3 array stored row by row sits at offset i*3 + j.
i, j = range_(4, 0), range_(3, 1)
flat = i * 3 + j
# Reshape to 12 elements and back to 4 x 3: the offset is split into (row, column) and joined again.
index = (flat // 3) * 3 + flat % 3
print(to_uir(index))
print(to_uir(simplify(index)))

# A closed program (no loops, no inputs) can be evaluated by rewriting alone.
x = stack(1.0, 2.0, 3.0)
print(to_python(run(x * x + 1.0)))
# --8<-- [end:taste]
