"""Chapter 1: dtypes, and the type two operands of different types are promoted to."""

from uopc.ir import DType, dtypes, promote

for d in (dtypes.bool, dtypes.int8, dtypes.uint32, dtypes.bfloat16, dtypes.float32):
    print(f"{d.name:<9} short={d.short:<5} bytes={d.itemsize}  kind={d.kind:<5} C: {d.c_name:<13} min={d.min}")
print("dtypes.f32 is dtypes.float32:", dtypes.f32 is dtypes.float32)
print("pointer:", dtypes.float32.ptr().name)
print()

row: list[DType] = [dtypes.bool, dtypes.i8, dtypes.i32, dtypes.u8, dtypes.u32, dtypes.u64, dtypes.f16, dtypes.bf16]
print("promote" + "".join(f"{d.short:>6}" for d in row))
for a in row:
    print(f"{a.short:<7}" + "".join(f"{promote(a, b).short:>6}" for b in row))
