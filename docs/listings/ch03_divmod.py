"""Chapter 3: division, remainder and comparison decided by bounds."""

from uopc.ir import Ops, UOp, range_, simplify, toposort

SYMBOL = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<"}


def infix(root: UOp) -> str:
    """A loop-index expression as infix text, with the ranges named i, j, k by axis."""
    text: dict[UOp, str] = {}
    for u in toposort(root):
        if u.op is Ops.RANGE:
            text[u] = "ijk"[u.arg.axis]
        elif u.op is Ops.CONST:
            text[u] = str(u.arg)
        else:
            a, b = (text[s] for s in u.src)
            text[u] = f"({a} {SYMBOL[u.op]} {b})"
    out = text[root]
    return out[1:-1] if out.startswith("(") else out


# --8<-- [start:divmod]
i, j, k = range_(4, 0), range_(3, 1), range_(8, 2)
flat = i * 3 + j  # (i, j) of a 4 x 3 array, flattened
for e in [
    flat // 3,
    flat % 3,
    (flat // 3) * 3 + flat % 3,
    (i * 4 + 2) // 2,
    (i * 4 + 2) % 4,
    (i * 6 + j * 2) % 4,
    (k * 4 + j) // 4,
    (flat % 12) // 3,
    j < 3,
    i * 2 + 1 < 5,
    k + 3 < 7,
]:
    print(f"{infix(e):<50} -> {infix(simplify(e))}")
# --8<-- [end:divmod]
