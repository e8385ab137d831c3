"""Chapter 10: the preface's six lines with DEBUG=4 and OPT=0: the plan's C, each kernel's time, and the result.

The timing lines are measured while the page is built, so their numbers vary from run to run."""

import os

os.environ["DEBUG"] = "4"  # print the plan's source when it is compiled, and time every kernel
os.environ["OPT"] = "0"  # no opts: the plain loops of rangeify

# --8<-- [start:taste]
import numpy as np

from uopc.tensor import Tensor

x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
y = (x * 2 + 1).relu().sum(1)
print(y.numpy())
# --8<-- [end:taste]
