"""simplify on float expressions: a rule may rewrite a float expression only if the result has the same value
for every input, inf, nan and -0.0 included (x * 0.0, x - x, x / x and x + 0.0 are not exact; x * 1.0 is).
The oracle is the expression folded at a constant input, with exec_alu's semantics."""

from __future__ import annotations

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.ir import DType, Ops, UOp, dtypes, param, run, simplify, substitute

FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e30, -1e30, math.inf, -math.inf, math.nan, 1e-40, 65504.0]


def bits(v: float) -> bytes:
    return b"nan" if math.isnan(v) else struct.pack("<d", v)


@st.composite
def expressions(draw: st.DrawFn) -> tuple[UOp, UOp]:
    """A float expression of one parameter x, built from x, awkward constants and every float op."""
    dt: DType = draw(st.sampled_from(FLOATS))
    x = param(0, dt)
    pool = [x]
    for _ in range(draw(st.integers(1, 6))):
        a = draw(st.sampled_from(pool))
        b = draw(st.sampled_from(pool) | st.sampled_from(SPECIAL).map(lambda v: UOp.const(v, dt)))
        op = draw(st.sampled_from([Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.MAX, Ops.MIN, Ops.NEG, Ops.WHERE]))
        if op is Ops.NEG:
            pool.append(-a)
        elif op is Ops.WHERE:
            pool.append((a < b).where(a, b))
        else:
            pool.append(a.alu(op, b))
    return x, pool[-1]


@settings(derandomize=True, database=None, deadline=None, max_examples=300)  # seeded: the same programs every run
@given(expressions())
def test_simplify_keeps_every_float_value(case: tuple[UOp, UOp]) -> None:
    x, e = case
    simplified = simplify(e)
    for v in SPECIAL:
        c = UOp.const(v, x.scalar_dtype)
        want, got = run(substitute(e, {x: c})).arg, run(substitute(simplified, {x: c})).arg
        assert bits(got) == bits(want), (v, e, simplified)


def test_inexact_identities_are_left_alone() -> None:
    for dt in FLOATS:
        x = param(0, dt)
        for e in (x * 0.0, 0.0 * x, x - x, x / x, x + 0.0, (x + 1.0) - x, (x * 2.0) * 0.5, x.maximum(x) - x):
            assert simplify(e) is e, (dt, e)
