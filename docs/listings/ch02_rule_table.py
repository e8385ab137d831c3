"""Chapter 2: a worked example. A five-rule table that folds integer constants and removes identities."""

from uopc.ir import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite, param, to_uir

# --8<-- [start:rules]
INT = dtypes.int32


def fold(x: UOp) -> UOp:
    """Both sources are constants: compute the value now (with Python's arithmetic; Chapter 3 does it right)."""
    a, b = (s.arg for s in x.src)
    return UOp.const(a + b if x.op is Ops.ADD else a * b, INT)


def log(ctx: list[str], name: str, out: UOp) -> UOp:
    ctx.append(name)
    return out


# fmt: off
toy = PatternMatcher([
    (UPat((Ops.ADD, Ops.MUL), INT, src=(UPat.cvar("a"), UPat.cvar("b")), name="x"),
        lambda ctx, x, a, b: log(ctx, "fold", fold(x))),
    (UPat.var("x", INT) + 0, lambda ctx, x: log(ctx, "x+0", x)),
    (UPat.var("x", INT) * 1, lambda ctx, x: log(ctx, "x*1", x)),
    (UPat.var("x", INT) * 0, lambda ctx, x: log(ctx, "x*0", x.const_like(0))),
    ((UPat.var("x", INT) + UPat.cvar("a")) + UPat.cvar("b"),
        lambda ctx, x, a, b: log(ctx, "(x+a)+b", x + (a.arg + b.arg))),
])
# fmt: on
# --8<-- [end:rules]

# --8<-- [start:apply]
n = param(0)
expr = ((n + 2) + 3) * (UOp.const(4) + UOp.const(-3)) + n * (UOp.const(2) * 0)
fired: list[str] = []
print(to_uir(expr))
print(to_uir(graph_rewrite(expr, toy, ctx=fired)))
print("rules fired, in order:", fired)
# --8<-- [end:apply]
