"""Chapter 6: the loop tree of the softmax kernel, drawn as Mermaid from LoopTree.parent, siblings in run order."""

from uopc.ir import AxisType, Ops, UOp, toposort
from uopc.lower import expand_reduces, linear_order, rangeify
from uopc.lower.linearize import LoopTree, loop_ranges

x = UOp.buffer(0, 12).reshape((3, 4))
e = (x - x.reduce(Ops.MAX, [1]).expand((3, 4))).exp()
kernel = rangeify([(UOp.buffer(1, 12), e / e.sum([1]).expand((3, 4)))])

# --8<-- [start:tree]
nodes = toposort(expand_reduces(kernel))
ranges = loop_ranges(nodes)
tree = LoopTree(nodes, ranges)
print("flowchart TB")
print('  root["root: the function body"]')
program = linear_order(kernel)  # siblings in the order they run
for r, parent in sorted(tree.parent.items(), key=lambda item: program.index(item[0])):
    name = {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(r.arg.kind, "idx") + str(r.arg.axis)
    accs = sum(u.op is Ops.DEFINE_ACC and tree.innermost(ranges[u], u) is r for u in nodes)
    holds = f"<br/>declares {accs} accumulators" if accs else ""
    print(f'  r{r.arg.axis}["{r.arg.kind.value} {name}: {r.src[0].arg} iterations{holds}"]')
    print(f"  {'root' if parent is None else f'r{parent.arg.axis}'} --> r{r.arg.axis}")
# --8<-- [end:tree]
