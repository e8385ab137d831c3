"""Symbolic algebra: exec_alu's reference semantics, simplify, vmin/vmax, inline_call and run.

Oracles: `ctypes` fixed-width integers for wrap-around, `fractions.Fraction` for exact floor division,
`struct` for float32/float16 rounding, and enumeration of every loop index for bounds and simplification.
"""

import ctypes
import math
import struct
from fractions import Fraction
from itertools import product
from typing import Any

import pytest

from uopc.ir import (
    DType,
    Ops,
    RunError,
    UOp,
    UOpError,
    bounds,
    call,
    dtypes,
    exec_alu,
    inline_call,
    param,
    range_,
    run,
    simplify,
    sink,
    stack,
    substitute,
    to_python,
    to_uir,
    vmax,
    vmin,
    where,
)

CTYPES: dict[DType, Any] = {  # the ctypes integer type of each width, which wraps on construction
    dtypes.int8: ctypes.c_int8,
    dtypes.int16: ctypes.c_int16,
    dtypes.int32: ctypes.c_int32,
    dtypes.int64: ctypes.c_int64,
    dtypes.uint8: ctypes.c_uint8,
    dtypes.uint16: ctypes.c_uint16,
    dtypes.uint32: ctypes.c_uint32,
    dtypes.uint64: ctypes.c_uint64,
}


def f32(x: float) -> float:
    """x rounded to the nearest float32, by the C library through struct."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def f16(x: float) -> float:
    return float(struct.unpack("<e", struct.pack("<e", x))[0])


def is_nan(x: object) -> bool:
    return isinstance(x, float) and math.isnan(x)


def evaluate(e: UOp, env: dict[UOp, int]) -> int | bool:
    """The value of an integer expression with each RANGE in env replaced by its value, by the interpreter."""
    out = run(substitute(e, {r: UOp.const(v, r.scalar_dtype) for r, v in env.items()})).arg
    assert isinstance(out, (int, bool))
    return out


def assignments(*ranges: UOp) -> list[dict[UOp, int]]:
    return [dict(zip(ranges, vals, strict=True)) for vals in product(*(range(r.src[0].arg) for r in ranges))]


# ---- exec_alu: integers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", list(CTYPES), ids=str)
def test_integer_arithmetic_wraps_at_the_width(dt: DType) -> None:
    c = CTYPES[dt]
    lo, hi = int(dt.min), int(dt.max)
    for a, b in product((lo, lo + 1, -1 if lo else 1, 0, 1, hi - 1, hi), repeat=2):
        assert exec_alu(Ops.ADD, dt, [a, b]) == c(a + b).value
        assert exec_alu(Ops.SUB, dt, [a, b]) == c(a - b).value
        assert exec_alu(Ops.MUL, dt, [a, b]) == c(a * b).value
    assert exec_alu(Ops.NEG, dt, [1]) == c(-1).value


@pytest.mark.parametrize(("a", "b"), list(product((-7, -6, -1, 0, 1, 6, 7), (-3, -2, -1, 1, 2, 3))))
def test_idiv_and_mod_are_floor_operations(a: int, b: int) -> None:
    q = math.floor(Fraction(a, b))  # exact rational division, rounded toward -inf
    assert exec_alu(Ops.IDIV, dtypes.int32, [a, b]) == q
    assert exec_alu(Ops.MOD, dtypes.int32, [a, b]) == a - b * q  # so the remainder has the divisor's sign


def test_floor_division_examples_c_gets_wrong() -> None:
    # C's / and % truncate toward zero: -7 / 2 == -3 and -7 % 2 == -1 there
    assert exec_alu(Ops.IDIV, dtypes.int32, [-7, 2]) == -4
    assert exec_alu(Ops.MOD, dtypes.int32, [-7, 2]) == 1
    assert exec_alu(Ops.MOD, dtypes.int32, [7, -2]) == -1


def test_integer_division_by_zero_is_zero_as_in_numpy() -> None:
    np_floor_div_by_zero = 0  # numpy: np.int32(5) // np.int32(0) == 0 (with a warning), and % likewise
    for op in (Ops.IDIV, Ops.MOD):
        assert exec_alu(op, dtypes.int32, [5, 0]) == np_floor_div_by_zero
    assert run(UOp.const(5) // 0).arg == 0


def test_comparisons_and_logic() -> None:
    assert exec_alu(Ops.CMPLT, dtypes.bool, [-1, 0]) is True
    assert exec_alu(Ops.CMPNE, dtypes.bool, [math.nan, math.nan]) is True
    assert exec_alu(Ops.AND, dtypes.uint8, [0b1100, 0b1010]) == 0b1000
    assert exec_alu(Ops.XOR, dtypes.bool, [True, True]) is False
    assert exec_alu(Ops.WHERE, dtypes.int32, [False, 1, 2]) == 2


# ---- exec_alu: floats -----------------------------------------------------------------------------------


def test_float32_results_are_rounded_to_float32() -> None:
    a, b = f32(0.1), f32(0.2)
    got = exec_alu(Ops.ADD, dtypes.float32, [a, b])
    assert got == f32(a + b) == 0.30000001192092896
    assert got != a + b  # the float64 sum of the same two float32 values is 0.30000000447034836
    assert exec_alu(Ops.ADD, dtypes.float32, [16777216.0, 1.0]) == 16777216.0  # 2**24 + 1 is no float32


def test_folding_rounds_every_step_to_float32() -> None:
    # 1 + 2**-24 is a tie, which rounds to 1.0 (even); doing it twice still gives 1.0. Folding the whole sum
    # in float64 and rounding once would give 1 + 2**-23, a different float32.
    eps = 2.0**-24
    folded = simplify((UOp.const(1.0) + eps) + eps)
    assert folded is UOp.const(1.0)
    assert f32(1.0 + eps + eps) == 1.0 + 2**-23  # what the float64 shortcut computes
    assert to_python(run((UOp.const(1.0) + eps) + eps)) == 1.0


def test_float16_and_bfloat16_round_to_their_own_precision() -> None:
    assert exec_alu(Ops.ADD, dtypes.float16, [1.0, 2.0**-11]) == f16(1.0 + 2.0**-11) == 1.0
    assert exec_alu(Ops.ADD, dtypes.float16, [60000.0, 10000.0]) == math.inf  # float16 overflows at 65520
    # bfloat16 keeps 8 significant bits: 1 + 3/256 lies halfway between 1 + 2/256 and 1 + 4/256; ties to even
    assert exec_alu(Ops.ADD, dtypes.bfloat16, [1.0, 3 / 256]) == 1 + 4 / 256
    assert exec_alu(Ops.ADD, dtypes.bfloat16, [1.0, 1 / 256]) == 1.0


def test_float_division_follows_ieee() -> None:
    assert exec_alu(Ops.DIV, dtypes.float32, [1.0, 0.0]) == math.inf
    assert exec_alu(Ops.DIV, dtypes.float32, [1.0, -0.0]) == -math.inf
    assert exec_alu(Ops.DIV, dtypes.float32, [-1.0, 0.0]) == -math.inf
    assert is_nan(exec_alu(Ops.DIV, dtypes.float32, [0.0, 0.0]))
    assert exec_alu(Ops.DIV, dtypes.float32, [1.0, 3.0]) == f32(1 / 3)


def test_libm_edge_cases_give_ieee_values() -> None:
    assert exec_alu(Ops.LOG, dtypes.float32, [0.0]) == -math.inf
    assert is_nan(exec_alu(Ops.SQRT, dtypes.float32, [-1.0]))
    assert exec_alu(Ops.EXP, dtypes.float32, [100.0]) == math.inf  # e**100 overflows a float32
    assert exec_alu(Ops.EXP, dtypes.float64, [100.0]) == math.exp(100.0)
    assert exec_alu(Ops.POW, dtypes.float32, [0.0, -1.0]) == math.inf
    assert exec_alu(Ops.POW, dtypes.float32, [-0.0, -1.0]) == -math.inf  # C: pow(-0, odd negative) is -inf
    assert exec_alu(Ops.POW, dtypes.float32, [-0.0, -2.0]) == math.inf
    assert is_nan(exec_alu(Ops.POW, dtypes.float32, [-8.0, 1 / 3]))


def test_max_and_min_propagate_nan() -> None:
    for op in (Ops.MAX, Ops.MIN):
        assert is_nan(exec_alu(op, dtypes.float32, [math.nan, 1.0]))
        assert is_nan(exec_alu(op, dtypes.float32, [1.0, math.nan]))


def test_casts() -> None:
    assert exec_alu(Ops.CAST, dtypes.int32, [3.7]) == 3  # toward zero, as C converts
    assert exec_alu(Ops.CAST, dtypes.int32, [-3.7]) == -3
    assert exec_alu(Ops.CAST, dtypes.uint8, [300]) == ctypes.c_uint8(300).value
    assert exec_alu(Ops.CAST, dtypes.int8, [-129]) == ctypes.c_int8(-129).value
    assert exec_alu(Ops.CAST, dtypes.bool, [0.5]) is True
    assert exec_alu(Ops.CAST, dtypes.float32, [True]) == 1.0
    assert exec_alu(Ops.CAST, dtypes.float16, [70000]) == math.inf


def test_int64_to_float32_rounds_once() -> None:
    # 2**60 + 2**36 + 1 is just above the midpoint between the float32 neighbours 2**60 and 2**60 + 2**37,
    # so it rounds up. Through float64 it is first rounded to the midpoint itself, then down to even.
    v = 2**60 + 2**36 + 1
    assert exec_alu(Ops.CAST, dtypes.float32, [v]) == float(2**60 + 2**37)
    assert exec_alu(Ops.CAST, dtypes.float32, [2**60 + 2**36]) == float(2**60)  # an exact tie goes to even


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, 3e9, -3e9])
def test_casts_of_inf_nan_or_out_of_range_floats_to_ints_are_not_folded(bad: float) -> None:
    assert exec_alu(Ops.CAST, dtypes.int32, [bad]) is None
    x = UOp.const(bad).cast(dtypes.int32)
    assert simplify(x) is x
    with pytest.raises(RunError, match="CAST node has no defined value"):
        run(x)


# ---- simplify -------------------------------------------------------------------------------------------

RI, RJ, RK = range_(4, 0), range_(3, 1), range_(5, 2)


def test_sums_are_canonical() -> None:
    assert simplify(RI + RJ) is simplify(RJ + RI)
    assert simplify((RI + 2) + (RJ - 2)) is simplify(RJ + RI)
    assert simplify(RI + RI + RI) is simplify(RI * 3)
    assert simplify(RI * 2 - RI) is RI
    assert simplify(RI - RI) is UOp.const(0)
    assert simplify((RI + RJ) * 2 - RJ * 2) is simplify(RI * 2)
    assert simplify(3 * (RI + 1)) is simplify(RI * 3 + 3)


def test_readme_example_simplifies_to_the_range() -> None:
    i, j = range_(4, 0), range_(3, 1)
    assert simplify(((i * 3 + j) // 3) % 4) is i
    assert simplify((i * 3 + j) % 3) is j


def test_division_by_a_constant_keeps_what_it_cannot_decide() -> None:
    e = simplify((RI * 4 + RJ) // 2)  # RI*4 leaves the division; RJ // 2 is 0 or 1
    for env in assignments(RI, RJ):
        assert evaluate(e, env) == (env[RI] * 4 + env[RJ]) // 2
    assert simplify((RI * 6 + 2) // 4) is simplify((RI * 3 + 1) // 2)  # both sides share the factor 2
    assert simplify((RI * 6 + 4) % 4) is simplify(((RI * 3 + 2) % 2) * 2)


def test_a_remainder_smaller_than_the_common_factor_leaves_the_division() -> None:
    """(g*y + r) // (g*d) is y // d when 0 <= r < g: a thread's row of 128 plus a position under 32, over 512,
    is the thread // 4, with no division left inside the position's loop (the GPT's head-major gradients,
    notes 148). Every value of the loops is checked, with offsets that reach past g and factors that do not
    divide the divisor, where the rule must not apply."""
    t, r = range_(16, 0), range_(32, 1)
    assert simplify((t * 128 + r) // 512) is simplify(t // 4)
    assert simplify((t * 128 + r + 64) // 512) is simplify(t // 4)  # r + 64 < 128 still
    for g, offset, k in product((96, 128, 130), (0, 96, 100), (256, 384, 512)):
        e = simplify((t * g + r + offset) // k)
        for env in assignments(t, r):
            assert evaluate(e, env) == (env[t] * g + env[r] + offset) // k, (g, offset, k)


def test_divmod_pairs_merge_back_even_with_a_constant() -> None:
    # reshapes write x as (x // c) * c + x % c; the pair must merge to x, constant part included
    x = RI + RJ + 1  # up to 6, so x // 4 and x % 4 are both undecided
    e = (x // 4) * 4 + x % 4 + RK
    s = simplify(e)
    assert s is simplify(RI + RJ + RK + 1)
    for env in assignments(RI, RJ, RK):
        assert evaluate(s, env) == env[RI] + env[RJ] + 1 + env[RK]


def test_nested_division_and_modulo() -> None:
    n = range_(100, 3)
    assert simplify((n // 4) // 5) is simplify(n // 20)
    assert simplify((n % 12) // 4) is simplify((n // 4) % 3)
    assert simplify((n % 12) % 4) is simplify(n % 4)
    for v in range(100):
        env = {n: v}
        assert evaluate(simplify((n % 12) // 4), env) == (v % 12) // 4


def test_comparisons_are_decided_by_bounds() -> None:
    assert simplify(RI < 4) is UOp.const(True)
    assert simplify(RI < 0) is UOp.const(False)
    assert simplify((RI + RJ) < 10) is UOp.const(True)
    assert simplify(RI.eq(7)) is UOp.const(False)
    assert simplify(RI.ne(-1)) is UOp.const(True)
    undecided = simplify(RI < 2)
    assert undecided.op is Ops.CMPLT


def test_comparison_with_constants_moved_across() -> None:
    e = simplify(RI * 2 + 1 < 6)  # 2i + 1 < 6  <=>  i < 3 (i is an integer)
    assert e is simplify(RI < 3)
    for env in assignments(RI):
        assert evaluate(e, env) == (env[RI] * 2 + 1 < 6)


def test_where_with_a_decided_condition_is_removed() -> None:
    assert simplify((RI < 10).where(RI, RJ)) is RI
    assert simplify((RI < 0).where(RI, RJ)) is RJ
    assert simplify(where(UOp.const(True), RI, RJ)) is RI
    assert simplify((RJ < 2).where(RI, RI)) is RI


def test_max_and_min_decided_by_bounds() -> None:
    assert simplify(RI.maximum(10)) is UOp.const(10)
    assert simplify(RI.minimum(-1)) is UOp.const(-1)
    assert simplify((RI + 10).maximum(RJ)) is simplify(RI + 10)
    assert simplify(RI.maximum(RJ)).op is Ops.MAX


def test_floats_are_never_reassociated() -> None:
    x = param(0, dtypes.float32)
    assert simplify((x + 1.0) + 2.0) is not simplify(x + 3.0)
    assert simplify((x + 1.0) + 2.0) is (x + 1.0) + 2.0
    # x + 0.0 is not x: -0.0 + 0.0 is +0.0. x - 0.0 and x * 1.0 are x for every x, -0.0 and nan included.
    assert simplify(x + 0.0) is x + 0.0
    assert simplify(x - 0.0) is x
    assert simplify(x * 1.0) is x
    assert simplify(x / 1.0) is x
    assert exec_alu(Ops.ADD, dtypes.float32, [-0.0, 0.0]) == 0.0
    assert str(exec_alu(Ops.ADD, dtypes.float32, [-0.0, 0.0])) == "0.0"  # +0.0, not -0.0


def test_boolean_identities() -> None:
    b = param(0, dtypes.bool)
    assert simplify(b.logical_not().logical_not()) is b
    assert simplify(b & True) is b
    assert simplify(b & False) is UOp.const(False)
    assert simplify(b | True) is UOp.const(True)
    assert simplify(b | False) is b
    assert simplify(b & b) is b


def test_constant_products_wrap_instead_of_crashing() -> None:
    # (x * 65536) * 65536 is x * 2**32, which wraps to x * 0 in int32
    p = param(0)
    s = simplify((p * 65536) * 65536)
    assert s is UOp.const(0)
    assert simplify((p // 65536) // 65536).op is Ops.IDIV  # 2**32 is no int32 divisor: left as it was
    for v in (-(2**31), -7, 0, 12345, 2**31 - 1):
        env = {p: UOp.const(v)}
        assert run(substitute(simplify((p // 65536) // 65536), env)).arg == (v // 65536) // 65536


def test_comparison_limits_that_do_not_fit_are_left_alone() -> None:
    # p + 10 < -2147483640 would become p < -2147483650, which no int32 holds; wrapping it would flip
    # the answer (for p = 0 the comparison is false)
    p = param(0)
    s = simplify(p + 10 < -2147483640)
    assert run(substitute(s, {p: UOp.const(0)})).arg is False
    s2 = simplify(p * 2 + (-(2**31)) < 2**31 - 1)
    assert run(substitute(s2, {p: UOp.const(5)})).arg is True


def test_modulo_near_the_dtype_minimum_does_not_crash() -> None:
    p = param(0)
    e = (p < 0).where(UOp.const(-(2**31)), UOp.const(-(2**31) + 1)) % 3
    s = simplify(e)
    for v in (-1, 1):
        assert run(substitute(s, {p: UOp.const(v)})).arg == (-(2**31) if v < 0 else -(2**31) + 1) % 3


def test_shaped_integer_graphs_keep_their_shape() -> None:
    s = stack(1, 2, 3)
    for e in (s * 0, s - s, s % 1, (s % 4).maximum(10)):
        out = simplify(e)
        assert out.shape == (3,)
        assert to_python(run(e)) == to_python(run(out))
    assert to_python(run((s * 0).reshape((3, 1)))) == [[0], [0], [0]]
    assert to_python(run(s - s)) == [0, 0, 0]


def test_simplify_is_a_fixed_point() -> None:
    e = simplify(((RI * 6 + RJ * 2 + 5) // 4) % 3 + (RK < 3).where(RI, RJ))
    assert simplify(e) is e


# ---- vmin / vmax ----------------------------------------------------------------------------------------

EXACT = [  # expressions whose interval bounds are tight: enumeration finds both ends
    RI,
    RI * 3 + RJ,
    RI - RJ,
    RI * -2,
    RI // 2,
    (RI - 5) // 2,
    RK % 3,
    (RK - 5) % 3,
    RI.maximum(RJ + 2),
    RI.minimum(RJ),
    (RI < 2).where(UOp.const(100), RJ),
]


@pytest.mark.parametrize("e", EXACT, ids=lambda e: to_uir(e).splitlines()[-1].split(" = ")[1])
def test_bounds_are_the_extremes_of_simple_expressions(e: UOp) -> None:
    values = [evaluate(e, env) for env in assignments(RI, RJ, RK)]
    assert bounds(e) == (min(values), max(values))
    assert (vmin(e), vmax(e)) == bounds(e)


def test_bounds_contain_every_value() -> None:
    e = ((RI * 3 + RJ) * 5 + RK) // 7 - (RJ * RK) % 4
    values = [evaluate(e, env) for env in assignments(RI, RJ, RK)]
    assert vmin(e) <= min(values) and max(values) <= vmax(e)


def test_bounds_of_what_may_wrap_claim_nothing() -> None:
    p = param(0)
    assert bounds(p) == (-(2**31), 2**31 - 1)
    assert bounds(p + 1) == bounds(p)  # p + 1 wraps for the largest p
    n = range_(UOp.const(100, dtypes.int8), 0)
    assert bounds(n) == (0, 99)
    assert bounds(n * 2) == (-128, 127)  # 99 * 2 does not fit an int8
    assert bounds(param(0, dtypes.float32)) == (-math.inf, math.inf)
    assert bounds(n.cast(dtypes.uint8)) == (0, 99)
    assert bounds((n - 1).cast(dtypes.uint8)) == (0, 255)  # -1 wraps to 255


# ---- CALL -----------------------------------------------------------------------------------------------


def test_inline_call_does_not_enter_nested_bodies() -> None:
    p0 = param(0)
    inner = call("sq", p0 * p0, p0 + 1)  # inner body uses its own PARAM 0; its argument uses the outer one
    outer = call("f", inner + p0, UOp.const(3))
    body = inline_call(outer)
    nested = body.src[0]
    assert nested.op is Ops.CALL and nested.src[0] is p0 * p0  # the inner body is untouched
    assert nested.src[1] is UOp.const(3) + 1  # its argument, in the outer body, is substituted
    assert body.src[1] is UOp.const(3)
    assert run(outer).arg == (3 + 1) ** 2 + 3
    assert run(body).arg == 19


def test_inline_call_needs_a_call() -> None:
    with pytest.raises(UOpError, match="inline_call: expected a CALL, got ADD"):
        inline_call(param(0) + 1)


def test_call_with_several_parameters() -> None:
    f = call("f", param(0) * 10 + param(1), UOp.const(4), UOp.const(2))
    assert run(f).arg == 42
    g = call("g", param(0, dtypes.float32) / param(1, dtypes.float32), UOp.const(1.0), UOp.const(4.0))
    assert run(g).arg == 0.25


# ---- run ------------------------------------------------------------------------------------------------


def test_run_evaluates_shaped_constants() -> None:
    m = stack(stack(1.0, 2.0, 3.0), stack(4.0, 5.0, 6.0))
    assert to_python(run(m * 2.0)) == [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]]
    col_sums = m.permute((1, 0)).sum((1,)).reshape((3,))
    assert to_python(run(col_sums)) == [5.0, 7.0, 9.0]
    row_max = m.reduce(Ops.MAX, (1,)).expand((2, 3))
    assert to_python(run(m - row_max)) == [[-2.0, -1.0, 0.0], [-2.0, -1.0, 0.0]]


def test_run_softmax_matches_python() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    x = stack(*xs)
    e = (x - x.reduce(Ops.MAX, (0,)).expand((4,))).exp()
    sm = e / e.sum((0,)).expand((4,))
    got = to_python(run(sm))
    want = [math.exp(v - max(xs)) / sum(math.exp(w - max(xs)) for w in xs) for v in xs]
    assert isinstance(got, list)
    assert all(abs(g - w) <= 1e-6 * w for g, w in zip(got, want, strict=True))
    assert all(f32(g) == g for g in got)  # every element is a float32


def test_run_of_a_scalar_and_of_a_sink_is_rejected_cleanly() -> None:
    assert run(UOp.const(2) + 3) is UOp.const(5)
    with pytest.raises(RunError, match="SINK"):
        run(sink(UOp.const(1)))


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        (param(0) + 1, "PARAM node reads a parameter outside any CALL"),
        (range_(4, 0) * 2, "RANGE node depends on a loop index"),
        (UOp.buffer(0, 3) + 1.0, "BUFFER node reads a buffer"),
    ],
)
def test_run_rejects_programs_that_are_not_closed(program: UOp, reason: str) -> None:
    with pytest.raises(RunError, match=reason):
        run(program)


@pytest.mark.parametrize("prefetch", [None, 16])
def test_a_load_whose_gate_is_decided_keeps_its_prefetch_hint_or_reads_nothing(prefetch: int | None) -> None:
    a = UOp.define_global(0, 64)
    i = range_(8, 0)
    always, never = (a.load(i * 8, i < 8 + k, prefetch) for k in (0, -8))  # i < 8 holds, i < 0 never does
    assert simplify(always) is a.load(i * 8, prefetch=prefetch)
    assert simplify(never) is UOp.const(0.0)
