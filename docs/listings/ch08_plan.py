"""Chapter 8: a plan up close (buffers, steps, outputs) and the C function that runs all of it in one call."""

import numpy as np

from uopc.lower import compile_plan, get_backend, make_plan, normalize
from uopc.tensor import Tensor

x = Tensor(np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32))

# --8<-- [start:plan]
graph, inputs = normalize([x.softmax(1).uop])
plan = make_plan(graph, opt=False)
for i, spec in enumerate(plan.buffers):
    role = "input" if i < plan.n_inputs else "output" if i in plan.outputs else "intermediate"
    print(f"buffer {i}: {spec.dtype.name}[{spec.size}]  {role}")
for step in plan.steps:
    kernel = plan.kernels[step.kernel]
    args = ", ".join(f"{p.name} = buffer {b}" for p, b in zip(kernel.params, step.buffers, strict=True))
    print(f"call {kernel.name}({args})")

compiled = compile_plan(plan, get_backend("C"))  # every kernel linearized, rendered into one file, built, loaded
source = compiled.source.text
print(source[source.index("void uopc_plan") :], end="")
# --8<-- [end:plan]
