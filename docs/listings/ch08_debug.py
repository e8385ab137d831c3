"""Chapter 8: DEBUG=2 on a small program, realized twice on new data. Its times vary from run to run."""

import os

os.environ["DEBUG"] = "2"  # before uopc is imported, as a user would set it in the shell

# --8<-- [start:debug]
import numpy as np

from uopc.tensor import Tensor

rng = np.random.default_rng(0)
for run in (1, 2):
    print(f"-- run {run}")
    x = Tensor(rng.standard_normal((256, 256)).astype(np.float32))
    w = Tensor(rng.standard_normal((256, 64)).astype(np.float32))
    (x @ w).softmax(1).numpy()
# --8<-- [end:debug]
