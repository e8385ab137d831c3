"""Appendix B: the CompileErrors a user meets from settings: a flag gcc does not know, and a compiler that
makes no library. Both come from the Tensor library's own path, as in a training script."""

import os

import numpy as np

from uopc.backend.c import CompileError
from uopc.tensor import Tensor

# --8<-- [start:settings]
for setting, value in (("CFLAGS", "-O3 -fopenmp -fno-such-flag"), ("CC", "true")):
    os.environ[setting] = value
    try:
        print((Tensor(np.arange(3, dtype=np.float32)) * 2).numpy())
    except CompileError as e:
        print(f"{setting}={value!r}: {type(e).__name__}: {e}\n")
    del os.environ[setting]
# --8<-- [end:settings]
