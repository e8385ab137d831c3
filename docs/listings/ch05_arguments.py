"""Chapter 5: Program checks every array against the signature before C sees a pointer."""

from collections.abc import Callable
from typing import Any

import numpy as np

from uopc.backend.c import ArgumentError, Program

# --8<-- [start:signature]
SOURCE = """
void scale(const float data0[restrict static 4], float data1[restrict static 4]) {
  for (int i = 0; i < 4; i++) data1[i] = 2.0f * data0[i];
}
"""
scale = Program(SOURCE, "scale")
print([(p.name, p.dtype.name, p.size, p.const) for p in scale.params])
# --8<-- [end:signature]


def read_only(a: Any) -> Any:
    a.flags.writeable = False
    return a


# --8<-- [start:refused]
calls: dict[str, Callable[[], list[Any]]] = {
    "float64 input": lambda: [np.arange(4.0), np.zeros(4, np.float32)],
    "too short": lambda: [np.zeros(3, np.float32), np.zeros(4, np.float32)],
    "transposed": lambda: [np.zeros((2, 2), np.float32).T, np.zeros(4, np.float32)],
    "every other": lambda: [np.zeros(8, np.float32)[::2], np.zeros(4, np.float32)],
    "read-only output": lambda: [np.zeros(4, np.float32), read_only(np.zeros(4, np.float32))],
    "a list": lambda: [[1.0, 2.0, 3.0, 4.0], np.zeros(4, np.float32)],
    "one array": lambda: [np.zeros(4, np.float32)],
}
for what, make in calls.items():
    try:
        scale(*make())
    except ArgumentError as e:
        print(f"{what:<17} {e}")
# --8<-- [end:refused]
