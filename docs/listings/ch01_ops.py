"""Chapter 1: the op groups that rules and checks are written against."""

from uopc.ir import Ops

groups = {
    "UNARY": Ops.UNARY,
    "BINARY": Ops.BINARY,
    "TERNARY": Ops.TERNARY,
    "COMPARISON": Ops.COMPARISON,
    "COMMUTATIVE": Ops.COMMUTATIVE,
    "MOVEMENT": Ops.MOVEMENT,
    "REDUCE_OPS": Ops.REDUCE_OPS,
}
for name, members in groups.items():
    # sets have no order of their own; print members in declaration order so the output is stable
    print(f"Ops.{name:<12}", " ".join(op.name for op in Ops if op in members))
grouped = set().union(*groups.values())
print(f"{'not in a group':<16}", " ".join(op.name for op in Ops if op not in grouped))
