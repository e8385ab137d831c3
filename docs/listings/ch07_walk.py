"""Chapter 7: the walk from the output down to the buffers, carrying the index of the element wanted."""

from uopc.ir import AxisType, Ops, UOp, range_, toposort
from uopc.lower.rangeify import Rangeify

SYMBOL = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<", Ops.AND: "&"}


def infix(root: UOp) -> str:
    """An index expression as infix text, with loops named as the C renderer names them."""
    text: dict[UOp, str] = {}
    for u in toposort(root):
        if u.op is Ops.RANGE:
            text[u] = {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(u.arg.kind, "idx") + str(u.arg.axis)
        elif u.op is Ops.CONST:
            text[u] = str(u.arg)
        elif u.op is Ops.CMPNE and u.src[1].op is Ops.CONST and u.src[1].arg is True:
            text[u] = f"!{text[u.src[0]]}"
        else:
            text[u] = "(" + f" {SYMBOL[u.op]} ".join(text[s] for s in u.src) + ")"
    out = text[root]
    return out[1:-1] if out.startswith("(") else out


# --8<-- [start:walk]
x = UOp.buffer(0, 6).reshape((2, 3))
value = x.permute((1, 0)) * 2.0  # shape (3, 2): out[i, j] = 2 * x[j, i]
loops = (range_(3, 0), range_(2, 1))
lowering = Rangeify(first_reduce_axis=2)
lowering.lower(value, loops)
for (u, idx, _), built in reversed(lowering.built.items()):  # built sources first: reversed, from the output
    shape = "" if not u.shape else str(u.shape)
    print(f"{u.op.name:<8} {shape:<7} element ({', '.join(map(infix, idx))})".ljust(44), "->", built.op.name)
# --8<-- [end:walk]
