"""Chapter 1: hash consing. A graph built twice is one object."""

from uopc.ir import param

# --8<-- [start:same-object]
x = param(0)
print("built twice, same object:", (x * 3 + 1) is (x * 3 + 1))
# --8<-- [end:same-object]
