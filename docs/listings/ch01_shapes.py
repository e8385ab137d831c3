"""Chapter 1: every node knows its shape; movement ops compute theirs from the arg at construction."""

from uopc.ir import Ops, UOp, dtypes

# --8<-- [start:shapes]
buf = UOp.buffer(0, 6, dtypes.float32)  # a flat input array of 6 floats
steps = [
    ("buffer", buf),
    ("reshape((2, 3))", m := buf.reshape((2, 3))),
    ("permute((1, 0))", m.permute((1, 0))),
    ("sum((1,))", s := m.sum((1,))),
    ("expand((2, 3))", e := s.expand((2, 3))),
    ("m - e", m - e),
    ("shrink(((0, 2), (1, 3)))", m.shrink(((0, 2), (1, 3)))),
    ("pad(((1, 0), (0, 2)))", m.pad(((1, 0), (0, 2)))),
    ("flip((0,))", m.flip((0,))),
    ("reduce(MAX, (0, 1))", m.reduce(Ops.MAX, (0, 1))),
]
for text, u in steps:
    print(f"{text:<26} {u.op.name:<12} shape={u.shape}")
# --8<-- [end:shapes]
print()
print("a scalar has shape", (m * 2.0).src[1].shape, "and broadcasts:", (m * 2.0).shape)
