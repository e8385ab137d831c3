"""Exercise 5.2: a hand-written C kernel, called through Program, whose signature lets every call be checked."""

from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.backend.c import Program

N = 8

SAXPY = f"""
void saxpy(const float data0[restrict static 1], const float data1[restrict static {N}],
           float data2[restrict static {N}]) {{
  for (int i = 0; i < {N}; i++) data2[i] = data0[0] * data1[i] + data2[i];
}}
"""


def saxpy(a: float, x: npt.NDArray[Any], y: npt.NDArray[Any]) -> None:
    """y <- a*x + y, in place, for float32 arrays of N elements. Anything else raises ArgumentError."""
    Program(SAXPY, "saxpy")(np.array([a], dtype=np.float32), x, y)
