"""Chapter 3: run, the interpreter made of rewrite rules, on a shaped program; and what it refuses."""

from collections.abc import Callable

from uopc.ir import Ops, RunError, UOp, param, range_, run, stack, to_python

# --8<-- [start:softmax]
row = stack(1.0, 2.0, 3.0)
top = row.reduce(Ops.MAX, (0,)).expand((3,))  # subtract the maximum first, so exp cannot overflow
e = (row - top).exp()
softmax = e / e.sum((0,)).expand((3,))
print(to_python(run(softmax)))
# --8<-- [end:softmax]

# --8<-- [start:refused]
programs: list[tuple[str, Callable[[], UOp]]] = [
    ("an input", lambda: param(0) + 1),
    ("a loop index", lambda: range_(4, 0) * 2),
    ("7 // 0", lambda: UOp.const(7) // 0),
]
for text, build in programs:
    try:
        run(build())
    except RunError as err:
        print(f"{text:<13} {err}")
# --8<-- [end:refused]
