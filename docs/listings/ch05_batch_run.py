"""Chapter 5: running a plan: one call into C; every plan buffer checked once against what its kernels need."""

import numpy as np

from uopc.backend.c import CCompiler, CRenderer, CRuntime
from uopc.ir import UOp
from uopc.lower import Kernel, Step, linearize, rangeify

scale = Kernel("scale", rangeify([(UOp.buffer(1, 6), UOp.buffer(0, 6) * 2.0 + 1.0)]))
rowsum = Kernel("rowsum", rangeify([(UOp.buffer(1, 2), UOp.buffer(0, 6).reshape((2, 3)).sum([1]).reshape((2,)))]))
steps = [Step(0, (0, 1)), Step(0, (1, 2)), Step(1, (2, 3))]
programs = [linearize(k) for k in (scale, rowsum)]

# --8<-- [start:run]
binary = CCompiler().compile(CRenderer().render(programs, steps))  # gcc runs here, or the cache answers
exe = CRuntime().load(binary, programs, steps)
x = np.arange(6, dtype=np.float32)
buffers = [x, np.zeros(6, np.float32), np.zeros(6, np.float32), np.zeros(2, np.float32)]
exe.run(buffers)  # one call into C runs all three steps
for b, p in exe.buffers.items():
    print(f"plan buffer {b}: {p.dtype.name}[{p.size}], {'read only' if p.const else 'written'}")
print("row sums:", buffers[3], " numpy:", ((x * 2 + 1) * 2 + 1).reshape(2, 3).sum(axis=1))
# --8<-- [end:run]
