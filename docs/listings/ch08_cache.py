"""Chapter 8: plans are cached by normalized structure; Python constants are compiled in, tensors are inputs."""

import numpy as np

from uopc.ir import Ops, to_uir
from uopc.lower import normalize
from uopc.tensor import Tensor, realizer

rng = np.random.default_rng(0)


# --8<-- [start:normalize]
def data() -> Tensor:
    return Tensor(rng.standard_normal(5).astype(np.float32))


a, b = data(), data()
print("buffers read:", [u.arg.slot for u in (a * 2.0).uop.toposort() if u.op is Ops.BUFFER], "and", end=" ")
print([u.arg.slot for u in (b * 2.0).uop.toposort() if u.op is Ops.BUFFER])
ga, inputs_a = normalize([(a * 2.0).uop])
gb, inputs_b = normalize([(b.detach() * 2.0).uop])
print("normalized graphs are one node:", ga is gb)
print(to_uir(ga))
# --8<-- [end:normalize]

# --8<-- [start:constants]
before = realizer.plans.made
for scale in (0.5, 0.25, 0.125):
    (data() * scale).numpy()  # a Python number becomes a CONST in the graph
print("Python constants:    ", realizer.plans.made - before, "new plans for 3 values")
before = realizer.plans.made
for scale in (0.5, 0.25, 0.125):
    s = Tensor([scale]).reshape(())  # a one-element tensor is a BUFFER: an input of the plan
    (data() * s).numpy()
print("one-element tensors: ", realizer.plans.made - before, "new plan for 3 values")
# --8<-- [end:constants]
