"""Chapter 10: softmax and log-sum-exp on large logits, written naively and in the stable form."""

import numpy as np

from uopc.tensor import Tensor

np.set_printoptions(precision=4, suppress=True)

# --8<-- [start:stable]
logits = Tensor(np.array([[1000.0, 1001.0, 1002.0], [-5.0, 0.0, 5.0]], np.float32))
e = logits.exp()
print("naive softmax:  ", (e / e.sum(1, keepdim=True)).numpy())
print("softmax:        ", logits.softmax(1).numpy())
print("naive logsumexp:", logits.exp().sum(1).log().numpy())
print("logsumexp:      ", logits.logsumexp(1).numpy())
labels = Tensor(np.array([2, 0], np.int32))
print("cross_entropy:  ", logits.cross_entropy(labels).numpy())
# --8<-- [end:stable]
