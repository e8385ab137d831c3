"""Chapter 1: a first graph. Four fields per node, shared sources, a topological order, and the .uir text."""

from uopc.ir import Ops, UOp, dtypes, param, to_uir, toposort

# --8<-- [start:build]
a = param(0, dtypes.float32)  # the first input of the program
b = param(1, dtypes.float32)  # the second input
y = (a + b) * a  # a is used twice: the graph has one node for it, not two

print(y)
print("op:   ", y.op)
print("dtype:", y.dtype)
print("src:  ", y.src)
print("arg:  ", y.arg)
print("y.src[0].src[0] is y.src[1]:", y.src[0].src[0] is y.src[1])

# The same graph built through the raw constructor, one field at a time.
same = UOp(Ops.MUL, dtypes.float32, (UOp(Ops.ADD, dtypes.float32, (a, b)), a))
print("same is y:", same is y)
# --8<-- [end:build]

print()
print("sources before users:", [u.op.name for u in toposort(y)])
print()
print(to_uir(y), end="")
