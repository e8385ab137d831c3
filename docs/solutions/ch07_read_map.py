"""Exercise 7.2: which buffer element does each output element of a view read? Ask the kernel rangeify built."""

import itertools

from uopc.ir import Ops, UOp, simplify, substitute, toposort
from uopc.lower import rangeify


def read_map(view: UOp) -> list[int | None]:
    """For each output element of `view` (a chain of movement ops over one BUFFER), in row-major order, the
    buffer offset it reads, or None where it reads nothing (padding)."""
    kernel = rangeify([(UOp.buffer(1, view.size, view.scalar_dtype), view)])
    ranges = sorted((u for u in toposort(kernel) if u.op is Ops.RANGE), key=lambda r: r.arg.axis)
    loads = [u for u in toposort(kernel) if u.op is Ops.LOAD]
    (store,) = [u for u in toposort(kernel) if u.op is Ops.STORE]
    out: list[int | None] = [None] * view.size
    for values in itertools.product(*(range(r.src[0].arg) for r in ranges)):
        fixed = {r: UOp.const(v, r.scalar_dtype) for r, v in zip(ranges, values, strict=True)}
        where = simplify(substitute(store.src[1], fixed)).arg
        for load in loads:  # none when only padding is ever read
            gate = True if len(load.src) == 2 else simplify(substitute(load.src[2], fixed)).arg
            if gate:
                out[where] = simplify(substitute(load.src[1], fixed)).arg
    return out
