"""Chapter 3: integer algebra is exact, float algebra is not, so simplify leaves floats alone."""

from uopc.ir import UOp, dtypes, param, run, simplify, to_uir

# --8<-- [start:reassoc]
big = UOp.const(16777216.0)  # 2**24: above it, float32 cannot hold every integer
print("(2**24 + 1) + 1 =", run((big + 1.0) + 1.0).arg)
print(" 2**24 + (1 + 1) =", run(big + (UOp.const(1.0) + 1.0)).arg)

x = param(0, dtypes.float32)
for text, e in [("(x + 1) + 2", (x + 1.0) + 2.0), ("x * 1", x * 1.0), ("x + 0", x + 0.0), ("x * 0", x * 0.0)]:
    print(f"{text:<12} simplifies to: {to_uir(simplify(e)).splitlines()[-1]}")
print("-0.0 + 0.0 =", run(UOp.const(-0.0) + 0.0).arg, "  nan * 0.0 =", run(UOp.const(float("nan")) * 0.0).arg)
# --8<-- [end:reassoc]
