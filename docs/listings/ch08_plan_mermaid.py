"""Chapter 8: the plan of a softmax drawn as a mermaid flowchart: buffers, kernels, reads and writes."""

import numpy as np

from uopc.lower import make_plan, normalize
from uopc.tensor import Tensor

x = Tensor(np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32))
graph, _ = normalize([x.softmax(1).uop])
plan = make_plan(graph, opt=False)

print("flowchart LR")
for i, spec in enumerate(plan.buffers):
    role = "input" if i < plan.n_inputs else "output" if i in plan.outputs else "intermediate"
    print(f'  b{i}[("buffer {i}<br/>{spec.dtype.name}[{spec.size}]<br/>{role}")]')
for n, step in enumerate(plan.steps):
    kernel = plan.kernels[step.kernel]
    print(f'  k{n}["{n + 1}. {kernel.name}"]')
    for param, b in zip(kernel.params, step.buffers, strict=True):
        print(f"  k{n} --> b{b}" if param.slot in kernel.written else f"  b{b} --> k{n}")
