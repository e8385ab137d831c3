"""Chapter 7: every movement op is an index transform. The read index (and gate) of each one's kernel."""

from uopc.ir import AxisType, Ops, UOp, toposort
from uopc.lower import rangeify

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


# --8<-- [start:movement]
x = UOp.buffer(0, 6).reshape((2, 3))  # x[a, b] is element a*3 + b of the buffer
views = {
    "x": x,
    "x.reshape((3, 2))": x.reshape((3, 2)),
    "x.permute((1, 0))": x.permute((1, 0)),
    "x.shrink(((0, 2), (1, 3)))": x.shrink(((0, 2), (1, 3))),
    "x.flip([1])": x.flip([1]),
    "x.pad(((0, 0), (1, 1)))": x.pad(((0, 0), (1, 1))),
    "row.expand((2, 3))": UOp.buffer(0, 3).reshape((1, 3)).expand((2, 3)),
}
for text, view in views.items():
    kernel = rangeify([(UOp.buffer(1, view.size), view)])
    (load,) = [u for u in toposort(kernel) if u.op is Ops.LOAD]
    gate = f"   if {infix(load.src[2])}" if len(load.src) == 3 else ""
    print(f"{text:<27} {view.shape!s:<7} reads {infix(load.src[1])}{gate}")
# --8<-- [end:movement]
