"""Appendix B: DEBUG=4 on a small program: the C of every kernel as its plan is built, then DEBUG=3's times.

The times are measured while the page is built, so they vary from run to run.
"""

import os

os.environ["DEBUG"] = "4"  # before uopc is imported, as a user would set it in the shell

# --8<-- [start:program]
import numpy as np

from uopc.tensor import Tensor

x = Tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
print((x.exp() / x.exp().sum(1, keepdim=True)).numpy())
# --8<-- [end:program]
