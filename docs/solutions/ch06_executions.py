"""Exercise 6.1: how many times does each node of a linearized program run? Hoisting, counted."""

from uopc.ir import Ops, UOp


def executions(program: list[UOp]) -> dict[UOp, int]:
    """Each node's run count: the product of the trip counts of the loops open where it is placed."""
    trips = [1]  # trips[-1]: how many times the innermost open block runs
    out: dict[UOp, int] = {}
    for u in program:
        if u.op is Ops.ENDRANGE:
            trips.pop()
        out[u] = trips[-1]
        if u.op is Ops.RANGE:
            trips.append(trips[-1] * u.src[0].arg)
    return out
