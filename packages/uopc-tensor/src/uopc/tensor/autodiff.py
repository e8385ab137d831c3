"""Reverse-mode automatic differentiation on the shaped UOp graph.

The gradient of a scalar loss with respect to every node is built as more graph, from the loss back to
the inputs: each node passes its gradient to its sources through the rule for its op. The rules are a
table, one per op; each takes the node and the gradient of the loss with respect to it, and returns one
gradient per source (None where no gradient flows: a comparison, a DETACH, an integer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from uopc.ir import Ops, UOp, round_to, toposort
from uopc.tensor.errors import TensorError


def _const(like: UOp, value: float) -> UOp:
    return UOp.const(round_to(like.scalar_dtype, value), like.scalar_dtype)


def _unexpand(g: UOp, src: UOp) -> UOp:
    """The gradient of an EXPAND: sum over the axes that were expanded."""
    axes = [i for i, (s, n) in enumerate(zip(src.shape, g.shape, strict=True)) if s == 1 and n != 1]
    return g.sum(axes) if axes else g


def _inverse(perm: Sequence[int]) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


def _reduce_grad(u: UOp, g: UOp) -> tuple[UOp | None, ...]:
    x = u.src[0]
    spread = g.expand(x.shape)
    if u.arg[0] is Ops.ADD:
        return (spread,)
    if u.arg[0] in (Ops.MAX, Ops.MIN):  # to the arg-max (or min); ties share it; a NaN result goes to the NaNs
        hit = (x.eq(u.expand(x.shape)) | x.ne(x)).cast(x.scalar_dtype)
        count = hit.sum(u.arg[1]).expand(x.shape)
        return (spread * hit / count,)
    if u.arg[0] is Ops.MUL:
        return (spread * _others_product(u),)
    raise TensorError(f"no gradient for a REDUCE_AXIS with {u.arg[0].name}")


def _others_product(u: UOp) -> UOp:
    """d prod(x) / d x_i, the product of the other elements, as PyTorch computes it: prod / x_i where no
    element is 0; where one is, the product of the rest at that element and 0 elsewhere; 0 where several
    are. (prod / x_i alone would be 0 / 0 at a zero.)"""
    x, axes = u.src[0], u.arg[1]
    zero, one = _const(x, 0.0), _const(x, 1.0)
    is_zero = x.eq(zero)
    zeros = is_zero.cast(x.scalar_dtype).sum(axes).expand(x.shape)
    rest = is_zero.where(one, x).reduce(Ops.MUL, axes).expand(x.shape)
    at_zero = zeros.eq(one).where(rest, zero)
    elsewhere = zeros.eq(zero).where(u.expand(x.shape) / is_zero.where(one, x), zero)
    return is_zero.where(at_zero, elsewhere)


def _extreme_grad(u: UOp, g: UOp) -> tuple[UOp | None, ...]:
    """MAX and MIN: the gradient goes to each operand that was not beaten; a tie splits it in half. With a
    NaN neither is beaten and both get it, as in PyTorch."""
    a, b = u.src
    a_beaten, b_beaten = (a < b, b < a) if u.op is Ops.MAX else (b < a, a < b)
    share = a.eq(b).where(g * _const(g, 0.5), g)
    zero = _const(g, 0.0)
    return (a_beaten.where(zero, share), b_beaten.where(zero, share))


def _pow_grad(u: UOp, g: UOp) -> tuple[UOp | None, ...]:
    """PyTorch's conventions at a = 0, where the textbook forms multiply 0 by an infinity: x ** 0 is
    constant, so its d/da is 0 (not 0 * 0 ** -1); d/db is 0 where a = 0 and b >= 0 (not 0 * log 0)."""
    a, b = u.src
    zero = _const(g, 0.0)
    d_a = b.eq(zero).where(zero, g * b * (a ** (b - _const(b, 1.0))))
    d_b = (a.eq(zero) & (b >= zero)).where(zero, g * u * a.log())
    return (d_a, d_b)


GradRule = Callable[[UOp, UOp], tuple[UOp | None, ...]]

GRADIENT_RULES: dict[Ops, GradRule] = {
    Ops.ADD: lambda u, g: (g, g),
    Ops.SUB: lambda u, g: (g, -g),
    Ops.MUL: lambda u, g: (g * u.src[1], g * u.src[0]),
    Ops.DIV: lambda u, g: (g / u.src[1], -g * u / u.src[1]),
    Ops.MOD: lambda u, g: (g, -g * (u.src[0] // u.src[1])),  # a % b = a - b * (a // b), as PyTorch's remainder
    Ops.NEG: lambda u, g: (-g,),
    Ops.EXP: lambda u, g: (g * u,),
    Ops.LOG: lambda u, g: (g / u.src[0],),
    Ops.SQRT: lambda u, g: (g / (u * _const(u, 2.0)),),
    Ops.SIN: lambda u, g: (g * u.src[0].cos(),),
    Ops.COS: lambda u, g: (-g * u.src[0].sin(),),
    Ops.POW: _pow_grad,
    Ops.MAX: _extreme_grad,
    Ops.MIN: _extreme_grad,
    Ops.WHERE: lambda u, g: (None, u.src[0].where(g, _const(g, 0.0)), u.src[0].where(_const(g, 0.0), g)),
    Ops.CAST: lambda u, g: (g.cast(u.src[0].scalar_dtype),),
    Ops.RESHAPE: lambda u, g: (g.reshape(u.src[0].shape),),
    Ops.PERMUTE: lambda u, g: (g.permute(_inverse(u.arg)),),
    Ops.EXPAND: lambda u, g: (_unexpand(g, u.src[0]),),
    Ops.SHRINK: lambda u, g: (g.pad([(b, s - e) for (b, e), s in zip(u.arg, u.src[0].shape, strict=True)]),),
    Ops.PAD: lambda u, g: (g.shrink([(b, b + s) for (b, _), s in zip(u.arg, u.src[0].shape, strict=True)]),),
    Ops.FLIP: lambda u, g: (g.flip(u.arg),),
    Ops.REDUCE_AXIS: _reduce_grad,
    # a buffer boundary forward is one backward: conv2d's im2col matrix gets its gradient as a matmul of its own
    Ops.CONTIGUOUS: lambda u, g: (UOp(Ops.CONTIGUOUS, g.dtype, (g,)),),
    Ops.DETACH: lambda u, g: (None,),
}


def _differentiable(u: UOp) -> bool:
    return u.scalar_dtype.is_float


def _fit(g: UOp, src: UOp) -> UOp:
    """A gradient for a scalar operand that an ALU op broadcast: summed over every element."""
    if g.shape == src.shape:
        return g
    return g.sum(range(len(g.shape))).reshape(src.shape)


@dataclass(frozen=True)
class CustomGradient:
    """The gradient of a node computed by a kernel of its own (a BUFFER's view, with no graph back to what it
    was computed from): the nodes it was computed from, and the rule from its gradient to theirs."""

    sources: tuple[UOp, ...]
    rule: Callable[[UOp], tuple[UOp | None, ...]]


def _pass_back(u: UOp, g: UOp, custom: Mapping[UOp, CustomGradient]) -> tuple[Sequence[UOp], tuple[UOp | None, ...]]:
    """u's sources and the gradient each gets from u's gradient g, by u's custom rule or its op's."""
    if u in custom:
        return custom[u].sources, custom[u].rule(g)
    rule = GRADIENT_RULES.get(u.op)
    if rule is None:
        raise TensorError(f"no gradient rule for {u.op.name} (dtype {u.dtype.name}, shape {u.shape})")
    return u.src, rule(u, g)


def compute_gradients(
    loss: UOp, targets: Sequence[UOp], custom: Mapping[UOp, CustomGradient] | None = None
) -> dict[UOp, UOp]:
    """d loss / d target for each target that the loss depends on, as graphs. A node in `custom` passes its
    gradient on by its own rule, to its own sources."""
    custom = custom or {}
    order = toposort(loss, lambda u: custom[u].sources if u in custom else u.src)
    wanted = set(targets)
    on_path: set[UOp] = set()
    for u in order:  # sources come first, so one pass finds every node that depends on a target
        if u in wanted or any(s in on_path for s in (custom[u].sources if u in custom else u.src)):
            on_path.add(u)
    grads: dict[UOp, UOp] = {loss: _const(loss, 1.0).reshape(loss.shape)}  # a loss of shape (1,) is a scalar too
    for u in reversed(order):
        g = grads.get(u)
        if g is None or not u.src:
            continue
        sources, source_grads = _pass_back(u, g, custom)
        for src, sg in zip(sources, source_grads, strict=True):
            if sg is None or src not in on_path or not _differentiable(src):
                continue
            fitted = _fit(sg, src)
            grads[src] = fitted if src not in grads else grads[src] + fitted
    return {t: grads[t] for t in targets if t in grads}
