"""Chapter 13: the plan of a Linear layer's product x @ w.T at 256: the copy of w into panels, then the matmul."""

from uopc.backend.c import render_c
from uopc.ir import UOp
from uopc.lower import linearize, make_plan, normalize

# --8<-- [start:plan]
n = 256
x = UOp.buffer(0, n * n).reshape((n, n))
w = UOp.buffer(1, n * n).reshape((n, n))  # a Linear layer's weight: (out features, in features)
y = (x.reshape((n, 1, n)).expand((n, n, n)) * w.reshape((1, n, n)).expand((n, n, n))).sum([2])  # x @ w.T
plan = make_plan(normalize([y.reshape((n, n))])[0], pack=2)  # packed for two threads, as the C backend packs here
for kernel, step in zip(plan.kernels, plan.steps, strict=True):
    print(f"{kernel.name}: plan buffers {step.buffers}, {kernel.opts}")
# --8<-- [end:plan]
copy, product = plan.kernels
print()
print(render_c(linearize(copy)).split("\n", 3)[3])  # the C without its #include lines
print(render_c(linearize(product)).split("\n", 3)[3])
