"""Chapter 3: a Mermaid picture of an index expression with the interval of every node, for the chapter."""

from uopc.ir import Ops, UOp, bounds, range_, toposort

# --8<-- [start:picture]
i, j = range_(4, 0), range_(3, 1)
root = (i * 3 + j) // 3
ids = {u: n for n, u in enumerate(toposort(root))}
print("flowchart BT")
for u, n in ids.items():
    what = f"const {u.arg}" if u.op is Ops.CONST else u.op.name.lower()
    if u.op is Ops.RANGE:
        what += f" {'ij'[u.arg.axis]}"
    lo, hi = bounds(u)
    print(f'  n{n}["{what}<br/>[{lo}, {hi}]"]')
edges: list[tuple[UOp, UOp]] = [(s, u) for u in ids for s in u.src]
for s, u in edges:
    print(f"  n{ids[s]} --> n{ids[u]}")
# --8<-- [end:picture]
