"""Chapter 5: how c_literal spells constants so that C reads exactly the IR's value and type."""

import math

from uopc.backend.c import c_literal
from uopc.ir import DType, dtypes

# --8<-- [start:literals]
cases: list[tuple[bool | int | float, DType]] = [
    (1.5, dtypes.float32),
    (1.5, dtypes.float64),
    (-1.5, dtypes.float32),
    (0.1, dtypes.float32),
    (math.inf, dtypes.float32),
    (-math.inf, dtypes.float32),
    (math.nan, dtypes.float32),
    (math.inf, dtypes.float16),
    (0.5, dtypes.float16),
    (3, dtypes.int32),
    (-3, dtypes.int32),
    (-(2**31), dtypes.int32),
    (2**40, dtypes.int64),
    (7, dtypes.uint32),
    (True, dtypes.bool),
]
for value, dtype in cases:
    print(f"{value!r:<14} {dtype.name:<8} -> {c_literal(value, dtype)}")
# --8<-- [end:literals]
