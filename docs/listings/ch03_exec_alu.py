"""Chapter 3: the reference semantics of ALU ops on constants, one case at a time."""

import math

from uopc.ir import DType, Ops, dtypes, exec_alu

# --8<-- [start:cases]
i32, u8, i8, f32, f16 = dtypes.int32, dtypes.uint8, dtypes.int8, dtypes.float32, dtypes.float16
cases: list[tuple[str, Ops, DType, list[bool | int | float]]] = [
    ("int32 max + 1", Ops.ADD, i32, [2**31 - 1, 1]),
    ("-7 // 2 (floor)", Ops.IDIV, i32, [-7, 2]),
    ("-7 % 2 (floor)", Ops.MOD, i32, [-7, 2]),
    ("7 % -2", Ops.MOD, i32, [7, -2]),
    ("7 // 0", Ops.IDIV, i32, [7, 0]),
    ("2**24 + 1 in f32", Ops.ADD, f32, [16777216.0, 1.0]),
    ("1 / 3 in f32", Ops.DIV, f32, [1.0, 3.0]),
    ("1 / -0.0", Ops.DIV, f32, [1.0, -0.0]),
    ("0 / 0", Ops.DIV, f32, [0.0, 0.0]),
    ("log(0)", Ops.LOG, f32, [0.0]),
    ("sqrt(-1)", Ops.SQRT, f32, [-1.0]),
    ("exp(100) in f32", Ops.EXP, f32, [100.0]),
    ("max(nan, 1)", Ops.MAX, f32, [math.nan, 1.0]),
    ("cast 300 to u8", Ops.CAST, u8, [300]),
    ("cast 200 to i8", Ops.CAST, i8, [200]),
    ("cast -2.7 to i32", Ops.CAST, i32, [-2.7]),
    ("cast inf to i32", Ops.CAST, i32, [math.inf]),
    ("cast nan to i32", Ops.CAST, i32, [math.nan]),
    ("cast 70000.0 to f16", Ops.CAST, f16, [70000.0]),
]
for text, op, dtype, operands in cases:
    print(f"{text:<20} {op.name:<5} {dtype.short:<4} -> {exec_alu(op, dtype, operands)!r}")
# --8<-- [end:cases]
