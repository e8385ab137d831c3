"""Chapter 5: several kernels in one C file, one library, and uopc_plan calling them in order."""

from uopc.ir import UOp
from uopc.lower import Kernel, Step, get_backend, linearize, rangeify

# --8<-- [start:batch]
scale = Kernel("scale", rangeify([(UOp.buffer(1, 6), UOp.buffer(0, 6) * 2.0 + 1.0)]))
rowsum = Kernel("rowsum", rangeify([(UOp.buffer(1, 2), UOp.buffer(0, 6).reshape((2, 3)).sum([1]).reshape((2,)))]))
# plan buffers: 0 = x, 1 = 2x + 1, 2 = 2(2x + 1) + 1, 3 = the row sums of buffer 2
steps = [Step(0, (0, 1)), Step(0, (1, 2)), Step(1, (2, 3))]
programs = [linearize(k) for k in (scale, rowsum)]
source = get_backend("C").renderer.render(programs, steps)  # one C file, for one gcc run and one library
print(source.text, end="")
# --8<-- [end:batch]
