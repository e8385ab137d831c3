"""Chapter 7: a reshape of a permute, its index built step by step without simplification, then simplified."""

from collections.abc import Sequence

from uopc.ir import AxisType, Ops, UOp, range_, simplify, toposort
from uopc.lower import rangeify

SYMBOL = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%"}


def infix(root: UOp) -> str:
    """An index expression as infix text, with loops named as the C renderer names them."""
    text: dict[UOp, str] = {}
    for u in toposort(root):
        if u.op is Ops.RANGE:
            text[u] = {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(u.arg.kind, "idx") + str(u.arg.axis)
        elif u.op is Ops.CONST:
            text[u] = str(u.arg)
        else:
            text[u] = "(" + f" {SYMBOL[u.op]} ".join(text[s] for s in u.src) + ")"
    out = text[root]
    return out[1:-1] if out.startswith("(") else out


# --8<-- [start:naive]
def naive_flat(idx: Sequence[UOp], shape: Sequence[int]) -> UOp:
    """flat_index without simplify: the row-major offset, in Horner form."""
    flat = idx[0]
    for i, s in zip(idx[1:], shape[1:], strict=True):
        flat = flat * s + i
    return flat


def naive_unflat(flat: UOp, shape: Sequence[int]) -> list[UOp]:
    """unflat_index without simplify: divide by each axis's stride, keep the remainder by its size."""
    strides = [1] * len(shape)
    for a in range(len(shape) - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    return [(flat // stride) % s for stride, s in zip(strides, shape, strict=True)]


# x.reshape((6, 4)).permute((1, 0)).reshape((2, 2, 6)), walked from the output element (idx0, idx1, idx2)
out = [range_(2, 0), range_(2, 1), range_(6, 2)]
permuted = naive_unflat(naive_flat(out, (2, 2, 6)), (4, 6))  # RESHAPE (2, 2, 6) <- (4, 6)
source = [permuted[1], permuted[0]]  # PERMUTE (4, 6) <- (6, 4): source axis a is output axis order.index(a)
(index,) = naive_unflat(naive_flat(source, (6, 4)), (24,))  # RESHAPE (6, 4) <- (24,)
print("built naively:", infix(index))
print("simplified:   ", infix(simplify(index)))
# --8<-- [end:naive]
# --8<-- [start:rangeify]
view = UOp.buffer(0, 24).reshape((6, 4)).permute((1, 0)).reshape((2, 2, 6))
(load,) = [u for u in toposort(rangeify([(UOp.buffer(1, 24), view)])) if u.op is Ops.LOAD]
print("rangeify:     ", infix(load.src[1]))
# --8<-- [end:rangeify]
