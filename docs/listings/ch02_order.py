"""Chapter 2: bottom-up against top-down."""

from uopc.ir import PatternMatcher, UOp, UPat, dtypes, graph_rewrite, param, to_uir

# --8<-- [start:order]
INT = dtypes.int32


def logged(name: str, out: UOp, ctx: list[str]) -> UOp:
    ctx.append(name)
    return out


rules = PatternMatcher(
    [
        (UPat.var("x", INT) * 0, lambda ctx, x: logged("x*0", x.const_like(0), ctx)),
        (UPat.var("x", INT) + UPat.var("x"), lambda ctx, x: logged("x+x", x * 2, ctx)),
    ]
)
a = param(0)
expr = (a + a) * 0
for bottom_up in (True, False):
    fired: list[str] = []
    out = graph_rewrite(expr, rules, ctx=fired, bottom_up=bottom_up)
    print(f"bottom_up={bottom_up!s:<5} result: {to_uir(out).strip():<12} rules fired: {fired}")
# --8<-- [end:order]
