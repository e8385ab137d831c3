"""Chapter 2: what a pattern matches, and what it captures."""

from uopc.ir import Ops, UOp, UPat, param

x, y = param(0), param(1)
# --8<-- [start:match]
pat = UPat.var("a") * UPat.cvar("c")  # MUL of anything by a constant
for u in (x * 3, 3 * x, x * y):
    found = pat.match(u, {})
    print(f"{len(found)} match(es);", [{k: v.op.name for k, v in m.items()} for m in found])

same = UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a")))  # a name used twice must be the same node
print("x + x:", len(same.match(x + x, {})), "  x + y:", len(same.match(x + y, {})))

print("UPat.const(0) on int 0:", len(UPat.const(0).match(UOp.const(0), {})))
print("UPat.const(0) on float 0.0:", len(UPat.const(0).match(UOp.const(0.0), {})))
print("UPat.const(0) on False:", len(UPat.const(0).match(UOp.const(False), {})))
# --8<-- [end:match]
print(pat)
