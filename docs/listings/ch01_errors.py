"""Chapter 1: a malformed node is refused by its constructor, with a message that names the problem."""

from collections.abc import Callable

from uopc.ir import Ops, UOp, UOpError, dtypes, param, stack

i = param(0, dtypes.int32)
f = param(1, dtypes.float32)
m = UOp.buffer(0, 6).reshape((2, 3))

# --8<-- [start:attempts]
attempts: list[tuple[str, Callable[[], UOp]]] = [
    ("i + f", lambda: i + f),
    ("i + 0.5", lambda: i + 0.5),
    ("exp of an int", i.exp),
    ("float32 const 0.1", lambda: UOp(Ops.CONST, dtypes.float32, (), 0.1)),
    ("uint8 const 300", lambda: UOp.const(300, dtypes.uint8)),
    ("where on an int", lambda: i.where(f, f)),
    ("reshape (2,3)->(4,)", lambda: m.reshape((4,))),
    ("expand (2,3)->(2,6)", lambda: m.expand((2, 6))),
    ("(2,3) + (3,2)", lambda: m + m.permute((1, 0))),
    ("stack int, float", lambda: stack(1, 2.0)),
]
for text, build in attempts:
    try:
        build()
    except UOpError as e:
        print(f"{text:<20} UOpError: {e}")
# --8<-- [end:attempts]
