"""Chapter 2: the memo of graph_rewrite makes a heavily shared graph cheap to rewrite."""

from uopc.ir import PatternMatcher, UOp, UPat, dtypes, graph_rewrite, param, to_uir


def logged(name: str, out: UOp, ctx: list[str]) -> UOp:
    ctx.append(name)
    return out


rules = PatternMatcher([(UPat.var("x", dtypes.int32) + UPat.var("x"), lambda ctx, x: logged("x+x", x * 2, ctx))])

# --8<-- [start:shared]
x = param(0)
for _ in range(64):
    x = x + x  # 65 distinct nodes; written out as a tree it would have 2**65 - 1
fired: list[str] = []
out = graph_rewrite(x, rules, ctx=fired)
print("distinct nodes:", len(x.toposort()), " rule applications:", len(fired))
print("result:", to_uir(out).splitlines()[-1])
# --8<-- [end:shared]
