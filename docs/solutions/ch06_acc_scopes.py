"""Exercise 6.2: which loops are open where each accumulator is declared?"""

from uopc.ir import AxisType, Ops, UOp


def loop_name(r: UOp) -> str:
    return {AxisType.REDUCE: "ridx", AxisType.THREAD: "tidx"}.get(r.arg.kind, "idx") + str(r.arg.axis)


def accumulator_scopes(program: list[UOp]) -> list[list[str]]:
    """For each DEFINE_ACC of a linearized program, in order, the loops open at its declaration, outermost first."""
    open_loops: list[UOp] = []
    scopes = []
    for u in program:
        if u.op is Ops.RANGE:
            open_loops.append(u)
        elif u.op is Ops.ENDRANGE:
            open_loops.pop()
        elif u.op is Ops.DEFINE_ACC:
            scopes.append([loop_name(r) for r in open_loops])
    return scopes
