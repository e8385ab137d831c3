"""Chapter 11: the initializations of the layers, measured on large layers against what PyTorch documents."""

import math

from uopc.tensor import Tensor
from uopc.tensor.nn import Embedding, LayerNorm, Linear

# --8<-- [start:init]
Tensor.manual_seed(0)
linear = Linear(400, 300)
w = linear.weight.numpy()
bound = 1 / math.sqrt(400)
print(f"Linear(400, 300).weight: range [{w.min():.4f}, {w.max():.4f}], bound 1/sqrt(400) = {bound:.4f}")
print(f"  std {w.std():.4f}, a uniform on [-b, b] has std b/sqrt(3) = {bound / math.sqrt(3):.4f}")
e = Embedding(1000, 64).weight.numpy()
print(f"Embedding(1000, 64).weight: mean {e.mean():+.4f}, std {e.std():.4f}")
norm = LayerNorm(16)
assert norm.weight is not None and norm.bias is not None
print("LayerNorm(16): weight all ones:", bool((norm.weight.numpy() == 1).all()), end=", ")
print("bias all zeros:", bool((norm.bias.numpy() == 0).all()))
# --8<-- [end:init]
