"""Symbolic algebra: constant folding, simplification of integer index arithmetic, bounds, and `run`.

Three things live here. `exec_alu` is the reference semantics of every ALU op on constants: the one place
that says what `IDIV` of two negative int32s is. `vmin`/`vmax` bound every integer expression by interval
arithmetic. `simplify` is a rule table that rewrites the index expressions produced by lowering into short,
canonical sums, deciding divisions, remainders and comparisons with those bounds. `run` evaluates a closed
program by rewriting alone: it is the interpreter later stages are tested against.
"""

from __future__ import annotations

import hashlib
import math
import os
import weakref
from collections.abc import Callable
from typing import Any

from uopc.ir.dtype import DType, dtypes
from uopc.ir.rewrite import PatternMatcher, Rule, RuleFn, UPat, graph_rewrite
from uopc.ir.uop import (
    ConstValue,
    Ops,
    UOp,
    UOpError,
    accumulator_dtype,
    call_body_params,
    prod,
    round_to,
    substitute,
    toposort,
)

INTS = tuple(d for d in dtypes.all() if d.is_int)


# ---------------------------------------------------------------------------------------------------------
# exec_alu: the value of an op on constants
# ---------------------------------------------------------------------------------------------------------


def _floordiv(a: ConstValue, b: ConstValue) -> ConstValue:
    """Floor division; by zero it gives 0, numpy's answer, which the C backend's helper also gives."""
    return 0 if b == 0 else int(a) // int(b)


def _floormod(a: ConstValue, b: ConstValue) -> ConstValue:
    return 0 if b == 0 else int(a) % int(b)


def _fdiv(a: ConstValue, b: ConstValue) -> float:
    if b != 0:
        return float(a) / float(b)
    if math.isnan(a) or a == 0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _guard(f: Callable[[float], float]) -> Callable[[ConstValue], float]:
    """A libm function with IEEE results where Python raises: log(0) = -inf, sqrt(-1) = nan, exp(1000) = inf."""

    def safe(x: ConstValue) -> float:
        try:
            return f(float(x))
        except OverflowError:
            return math.inf
        except ValueError:
            if f is math.log and x == 0:
                return -math.inf
            return math.nan

    return safe


def _pow(a: ConstValue, b: ConstValue) -> float:
    try:
        return math.pow(float(a), float(b))
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        if a == 0:  # zero to a negative power: a pole, whose sign is that of -0.0 for an odd power, as in C
            return math.copysign(math.inf, a) if float(b).is_integer() and int(b) % 2 else math.inf
        return math.nan


def _max(a: ConstValue, b: ConstValue) -> ConstValue:
    """Propagates NaN, as numpy does and as the C backend renders it."""
    return a if a > b or _isnan(a) else b


def _isnan(x: ConstValue) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _min(a: ConstValue, b: ConstValue) -> ConstValue:
    return a if a < b or _isnan(a) else b


# --8<-- [start:exec-alu]
ALU_SEMANTICS: dict[Ops, Callable[..., ConstValue | None]] = {
    Ops.NEG: lambda a: -a,
    Ops.EXP: _guard(math.exp),
    Ops.LOG: _guard(math.log),
    Ops.SQRT: _guard(math.sqrt),
    Ops.SIN: _guard(math.sin),
    Ops.COS: _guard(math.cos),
    Ops.ADD: lambda a, b: a + b,
    Ops.SUB: lambda a, b: a - b,
    Ops.MUL: lambda a, b: a * b,
    Ops.DIV: _fdiv,
    Ops.IDIV: _floordiv,  # floor division, as in Python
    Ops.MOD: _floormod,  # the sign of the divisor, as in Python
    Ops.POW: _pow,
    Ops.MAX: _max,
    Ops.MIN: _min,
    Ops.CMPLT: lambda a, b: a < b,
    Ops.CMPEQ: lambda a, b: a == b,
    Ops.CMPNE: lambda a, b: a != b,
    Ops.AND: lambda a, b: a & b,
    Ops.OR: lambda a, b: a | b,
    Ops.XOR: lambda a, b: a ^ b,
    Ops.WHERE: lambda c, a, b: a if c else b,
}


def exec_alu(op: Ops, dtype: DType, operands: list[ConstValue]) -> ConstValue | None:
    """The value of `op` on constant operands, as `dtype` holds it; None when it has no defined value.

    Integers wrap at their width and divide with floor semantics; float results are computed in float64
    and rounded once to the result's precision, which for +, -, *, / and sqrt gives the exactly rounded
    float32 answer. An integer division or modulo by zero is 0, as in numpy (and the C backend's helpers).
    A cast of inf or nan (or of any float out of range) to an integer is undefined in C: it gives None, and
    the node stays unfolded.
    """
    if op is Ops.CAST:
        (x,) = operands
        if dtype.is_int and isinstance(x, float) and not (math.isfinite(x) and dtype.min <= math.trunc(x) <= dtype.max):
            return None
        return round_to(dtype, math.trunc(x) if dtype.is_int and isinstance(x, float) else x)
    value = ALU_SEMANTICS[op](*operands)
    return None if value is None else round_to(dtype, value)


# --8<-- [end:exec-alu]


# ---------------------------------------------------------------------------------------------------------
# vmin / vmax: interval bounds of integer expressions
# ---------------------------------------------------------------------------------------------------------

Interval = tuple[ConstValue, ConstValue]


def _corners(f: Callable[[int, int], int], a: Interval, b: Interval) -> Interval:
    vals = [f(int(x), int(y)) for x in a for y in b]
    return min(vals), max(vals)


def _bounds_idiv(u: UOp, a: Interval, b: Interval) -> Interval | None:
    if b[0] > 0 or b[1] < 0:  # the divisor never crosses zero: floor division is monotonic at the corners
        return _corners(lambda x, y: x // y, a, b)
    return None


def _bounds_mod(u: UOp, a: Interval, b: Interval) -> Interval | None:
    if b[0] == b[1] and b[0] > 0:
        c = int(b[0])
        if a[0] >= 0 and a[1] < c:
            return a
        if a[0] // c == a[1] // c:  # no wrap-around inside the interval
            return a[0] % c, a[1] % c
        return 0, c - 1
    if b[0] > 0:
        return 0, b[1] - 1
    return None


def _bounds_cmp(u: UOp, a: Interval, b: Interval) -> Interval:
    decided = _decide_cmp(u.op, a, b)
    return (0, 1) if decided is None else (int(decided), int(decided))


# --8<-- [start:decide-cmp]
def _decide_cmp(op: Ops, a: Interval, b: Interval) -> bool | None:
    """The value of `a <op> b` for every pair of values in the two intervals, or None if it varies."""
    if op is Ops.CMPLT:
        return True if a[1] < b[0] else False if a[0] >= b[1] else None
    disjoint = a[1] < b[0] or b[1] < a[0]
    same_point = a[0] == a[1] == b[0] == b[1]
    if not (disjoint or same_point):
        return None
    return same_point if op is Ops.CMPEQ else disjoint


# --8<-- [end:decide-cmp]


def _bounds_where(u: UOp, c: Interval, a: Interval, b: Interval) -> Interval:
    if c[0] == c[1]:
        return a if c[0] else b
    return min(a[0], b[0]), max(a[1], b[1])


def _bounds_cast(u: UOp, a: Interval) -> Interval | None:
    return a if not u.src[0].scalar_dtype.is_float else None


# Each entry maps source intervals to the node's interval; None means "anything the dtype holds".
# --8<-- [start:bounds-table]
_BOUNDS: dict[Ops, Callable[..., Interval | None]] = {
    Ops.ADD: lambda u, a, b: (a[0] + b[0], a[1] + b[1]),
    Ops.SUB: lambda u, a, b: (a[0] - b[1], a[1] - b[0]),
    Ops.NEG: lambda u, a: (-a[1], -a[0]),
    Ops.MUL: lambda u, a, b: _corners(lambda x, y: x * y, a, b),
    Ops.IDIV: _bounds_idiv,
    Ops.MOD: _bounds_mod,
    Ops.MAX: lambda u, a, b: (max(a[0], b[0]), max(a[1], b[1])),
    Ops.MIN: lambda u, a, b: (min(a[0], b[0]), min(a[1], b[1])),
    Ops.CMPLT: _bounds_cmp,
    Ops.CMPEQ: _bounds_cmp,
    Ops.CMPNE: _bounds_cmp,
    Ops.AND: lambda u, a, b: (min(a[0], b[0]), min(a[1], b[1])) if u.dtype is dtypes.bool else None,
    Ops.OR: lambda u, a, b: (max(a[0], b[0]), max(a[1], b[1])) if u.dtype is dtypes.bool else None,
    Ops.WHERE: _bounds_where,
    Ops.CAST: _bounds_cast,
    Ops.RANGE: lambda u, end: (0, max(end[1] - 1, 0)),  # a loop that never runs: any bounds are true
    Ops.CONST: lambda u: (u.arg, u.arg),
}


def _bounds_of(u: UOp) -> Interval:
    dt = u.scalar_dtype
    if dt.is_float or u.op not in _BOUNDS:
        return dt.min, dt.max
    found = _BOUNDS[u.op](u, *(bounds(s) for s in u.src))
    if found is None or found[0] < dt.min or found[1] > dt.max:  # may wrap: claim nothing
        return dt.min, dt.max
    return found


# --8<-- [end:bounds-table]


# --8<-- [start:bounds]
def bounds(u: UOp) -> Interval:
    """The interval [vmin, vmax] that every value of `u` lies in; cached on the node."""
    if u._bounds is None:
        for n in toposort(u, lambda x: [s for s in x.src if s._bounds is None]):
            n._bounds = _bounds_of(n)
    assert u._bounds is not None
    return u._bounds


# --8<-- [end:bounds]


def vmin(u: UOp) -> ConstValue:
    return bounds(u)[0]


def vmax(u: UOp) -> ConstValue:
    return bounds(u)[1]


# ---------------------------------------------------------------------------------------------------------
# Canonical sums: an integer expression as constant + sum of coefficient * term
# ---------------------------------------------------------------------------------------------------------


# --8<-- [start:linear-terms]
def linear_terms(u: UOp) -> tuple[dict[UOp, int], int]:
    """`u` as sum(coefficient * term) + constant, where no term is an ADD, SUB, NEG, constant multiple or CONST."""
    terms: dict[UOp, int] = {}
    constant = 0
    stack = [(u, 1)]
    while stack:
        x, k = stack.pop()
        if x.op is Ops.CONST:
            constant += k * x.arg
        elif x.op is Ops.ADD:
            stack += [(x.src[0], k), (x.src[1], k)]
        elif x.op is Ops.SUB:
            stack += [(x.src[0], k), (x.src[1], -k)]
        elif x.op is Ops.NEG:
            stack.append((x.src[0], -k))
        elif x.op is Ops.MUL and x.src[1].op is Ops.CONST:
            stack.append((x.src[0], k * x.src[1].arg))
        elif x.op is Ops.MUL and x.src[0].op is Ops.CONST:
            stack.append((x.src[1], k * x.src[0].arg))
        else:
            terms[x] = terms.get(x, 0) + k
    return {t: k for t, k in terms.items() if k != 0}, constant


# --8<-- [end:linear-terms]


# held weakly, like the nodes themselves: a key lives as long as its node
_SORT_KEYS: weakref.WeakKeyDictionary[UOp, tuple[int, int, str]] = weakref.WeakKeyDictionary()


def sort_key(u: UOp) -> tuple[int, int, str]:
    """A deterministic order on nodes, so canonical sums come out the same in every run: loop indices by
    axis first, then the op, then a digest of the whole subgraph. The key is flat, so comparing two keys
    never recurses, however deep the graphs behind them."""
    if u not in _SORT_KEYS:
        for n in toposort(u, lambda x: [s for s in x.src if s not in _SORT_KEYS]):
            text = "|".join([n.op.name, n.dtype.name, repr(n.arg), *(_SORT_KEYS[s][2] for s in n.src)])
            digest = hashlib.sha1(text.encode()).hexdigest()
            _SORT_KEYS[n] = (n.op.value, n.arg.axis if n.op is Ops.RANGE else -1, digest)
    return _SORT_KEYS[u]


# --8<-- [start:build-sum]
def build_sum(terms: dict[UOp, int], constant: int, dtype: DType) -> UOp:
    """The canonical form: terms in `sort_key` order, each times its coefficient, then the constant."""
    out: UOp | None = None
    for t in sorted(terms, key=sort_key):
        k = terms[t]
        term = t if k == 1 else t * UOp.const(round_to(dtype, k), dtype)
        out = term if out is None else out + term
    if out is None:
        return UOp.const(round_to(dtype, constant), dtype)
    return out if constant == 0 else out + UOp.const(round_to(dtype, constant), dtype)


# --8<-- [end:build-sum]


def _merge_divmod_pairs(terms: dict[UOp, int]) -> tuple[dict[UOp, int], int] | None:
    """Replace k*c*(x//c) + k*(x%c) by k*x: the new terms and the constant k*x adds; None when no pair is present.

    `terms` itself is left as it is.
    """
    merged, added, changed = dict(terms), 0, False
    for t in terms:
        if t.op is Ops.MOD and t.src[1].op is Ops.CONST and t in merged:
            x, c, k = t.src[0], t.src[1], merged[t]
            div = next((d for d in _quotients(x, c) if merged.get(d) == k * c.arg), None)
            if div is not None:
                del merged[t], merged[div]
                inner, inner_const = linear_terms(x)
                for it, ik in inner.items():
                    merged[it] = merged.get(it, 0) + ik * k
                added += inner_const * k
                changed = True
    return ({t: k for t, k in merged.items() if k != 0}, added) if changed else None


def _quotients(x: UOp, c: UOp) -> list[UOp]:
    """The forms x // c takes after simplification: itself, or z // (a*c) when x is z // a."""
    forms = [UOp(Ops.IDIV, x.dtype, (x, c))]
    if x.op is Ops.IDIV and x.src[1].op is Ops.CONST and x.src[1].arg > 0 and c.arg > 0:
        ac = x.src[1].arg * c.arg
        if ac <= x.scalar_dtype.max:
            forms.append(UOp(Ops.IDIV, x.dtype, (x.src[0], x.const_like(ac))))
    return forms


def canonical_sum(x: UOp) -> UOp | None:
    terms, constant = linear_terms(x)
    merged = _merge_divmod_pairs(terms)
    if merged is not None:
        terms, constant = merged[0], constant + merged[1]
    out = build_sum(terms, constant, x.scalar_dtype)
    return None if out is x else out


# ---------------------------------------------------------------------------------------------------------
# Division and remainder by a positive constant, decided with bounds
# ---------------------------------------------------------------------------------------------------------


def _split_by(x: UOp, c: int) -> tuple[UOp, UOp, int]:
    """x = c * quotient + rest, where quotient collects the terms divisible by c; also the gcd of rest and c."""
    terms, constant = linear_terms(x)
    q_const, r_const = divmod(constant, c)
    quotient = {t: k // c for t, k in terms.items() if k % c == 0}
    rest = {t: k for t, k in terms.items() if k % c != 0}
    g = math.gcd(c, r_const, *rest.values())
    dt = x.scalar_dtype
    return build_sum(quotient, q_const, dt), build_sum(rest, r_const, dt), g


def never_wraps(*xs: UOp) -> bool:
    """True when bounds prove each sum below was computed without wrapping around its dtype.

    Sums and products wrap (exec_alu's semantics), and reordering them is exact modulo 2**bits; division,
    remainder and comparison are not, so their rules must know nothing wrapped. A sum that may wrap has
    the full range of its dtype as bounds, since interval arithmetic claims nothing then.
    """
    return all(bounds(x) != (x.scalar_dtype.min, x.scalar_dtype.max) for x in xs)


# --8<-- [start:fold-divmod]
def fold_idiv(x: UOp, c: UOp) -> UOp | None:
    """x // c: the terms divisible by c leave the division; what is left is decided by its bounds."""
    k = int(c.arg)
    if k <= 0 or not never_wraps(x):
        return None
    quotient, rest, g = _split_by(x, k)
    lo, hi = (int(b) for b in bounds(rest))
    if lo // k == hi // k:
        return quotient + rest.const_like(lo // k)
    if quotient.op is Ops.CONST and quotient.arg == 0:
        if g > 1:  # (g*y) // (g*d) == y // d
            return _divide_exactly(rest, g) // (k // g)
        return None
    return quotient + rest // c


def fold_mod(x: UOp, c: UOp) -> UOp | None:
    """x % c: the terms divisible by c drop out; what is left is decided by its bounds."""
    k = int(c.arg)
    if k <= 0 or not never_wraps(x):
        return None
    _, rest, g = _split_by(x, k)
    lo, hi = (int(b) for b in bounds(rest))
    if lo // k == hi // k:
        shift, dt = (lo // k) * k, rest.scalar_dtype
        if not shift:
            return rest
        return rest - shift if dt.min <= shift <= dt.max else None  # near the dtype's minimum, keep the MOD
    if rest is x:
        if g > 1:  # (g*y) % (g*d) == g * (y % d)
            return (_divide_exactly(rest, g) % (k // g)) * g
        return None
    return rest % c


# --8<-- [end:fold-divmod]


def _divide_exactly(x: UOp, g: int) -> UOp:
    terms, constant = linear_terms(x)
    return build_sum({t: k // g for t, k in terms.items()}, constant // g, x.scalar_dtype)


def fold_cmplt_const(x: UOp, c: UOp) -> UOp | None:
    """sum + k < c  ->  sum < c - k, and g*y < c -> y < ceil(c / g): fewer operations per comparison."""
    terms, constant = linear_terms(x)
    if not terms or not never_wraps(x):
        return None
    g = math.gcd(*terms.values())
    if constant == 0 and g == 1:
        return None
    limit, dt = c.arg - constant, c.scalar_dtype
    if g > 1 and min(terms.values()) > 0:
        lhs, limit = _divide_exactly(build_sum(terms, 0, x.scalar_dtype), g), -(-limit // g)
    elif constant != 0:
        lhs = build_sum(terms, 0, x.scalar_dtype)
    else:
        return None
    if not (dt.min <= limit <= dt.max and never_wraps(lhs)):  # a limit or a sum the dtype cannot hold: keep it
        return None
    return lhs < c.const_like(limit)


def decide_cmp(cmp: UOp) -> UOp | None:
    decided = _decide_cmp(cmp.op, bounds(cmp.src[0]), bounds(cmp.src[1]))
    return None if decided is None else UOp.const(decided)


# --8<-- [start:fold-constants]
def fold_constants(x: UOp) -> UOp | None:
    if not all(s.op is Ops.CONST for s in x.src):
        return None
    value = exec_alu(x.op, x.scalar_dtype, [s.arg for s in x.src])
    return None if value is None else UOp.const(value, x.scalar_dtype)


def fold_by_bounds(x: UOp) -> UOp | None:
    """An integer expression whose bounds meet is that constant."""
    lo, hi = bounds(x)
    return UOp.const(lo, x.scalar_dtype) if lo == hi else None


# --8<-- [end:fold-constants]


def _gated_load(p: UOp, i: UOp, g: UOp) -> UOp:
    """A load whose gate is decided: a plain load, or no load at all and the value 0."""
    return p.load(i) if g.arg else UOp.const(round_to(p.scalar_dtype, 0), p.scalar_dtype)


def _positive(*cs: UOp) -> bool:
    return all(c.arg > 0 for c in cs)


def _fits(x: UOp, v: int) -> bool:
    """`v` is a value of `x`'s dtype."""
    return x.scalar_dtype.min <= v <= x.scalar_dtype.max


def _multiple_of(m: UOp, a: UOp) -> bool:
    """m and a positive, and m a multiple of a."""
    return _positive(m, a) and m.arg % a.arg == 0


def _pick_max(a: UOp, b: UOp) -> UOp | None:
    return a if vmin(a) >= vmax(b) else b if vmin(b) >= vmax(a) else None


def _pick_min(a: UOp, b: UOp) -> UOp | None:
    return a if vmax(a) <= vmin(b) else b if vmax(b) <= vmin(a) else None


# --8<-- [start:shape-keeping]
class ShapeKeepingMatcher(PatternMatcher):
    """A rule table written for scalars that also meets shaped nodes (`run` evaluates shaped programs with it).

    A rule may prove that a shaped node is a scalar (x * 0 is 0, x - x is 0, a MAX decided by bounds is its
    scalar operand); that scalar stands for every element, so it is broadcast back to the node's shape, and a
    rewrite never changes a shape.
    """

    def rewrite(self, u: UOp, ctx: Any = None) -> tuple[UOp, Rule] | None:
        hit = super().rewrite(u, ctx)
        if hit is None or hit[0].shape == u.shape or hit[0].shape != ():
            return hit
        return hit[0].reshape((1,) * len(u.shape)).expand(u.shape), hit[1]


# --8<-- [end:shape-keeping]


# --8<-- [start:symbolic-rules]
_int, _c = UPat.var("x", INTS), UPat.cvar("c", INTS)
_a, _b, _m, _n = (UPat.cvar(k, INTS) for k in "abmn")

# fmt: off
symbolic_rules: list[tuple[UPat, RuleFn]] = [
    # constants fold with the reference semantics; so does any integer expression whose bounds meet
    (UPat(Ops.ALU | {Ops.CAST}, name="x"), fold_constants),
    (UPat(Ops.ALU - Ops.COMPARISON, INTS, name="x"), fold_by_bounds),
    # identities that hold exactly, for every dtype
    (UPat.var("x") * UPat.cvar("one"), lambda x, one: x if one.arg == 1 else None),
    (UPat(Ops.DIV, src=(UPat.var("x"), UPat.const(1.0))), lambda x: x),
    (UPat(Ops.SUB, src=(UPat.var("x"), UPat.const(0.0))), lambda x: x),
    (UPat.var("c").where(UPat.var("a"), UPat.var("a")), lambda c, a: a),
    (UPat.cvar("c").where(UPat.var("a"), UPat.var("b")), lambda c, a, b: a if c.arg else b),
    (UPat.var("x", dtypes.bool).ne(True).ne(True), lambda x: x),
    (UPat(Ops.AND, src=(UPat.var("x"), UPat.cvar("c", dtypes.bool))), lambda x, c: x if c.arg else c),
    (UPat(Ops.OR, src=(UPat.var("x"), UPat.cvar("c", dtypes.bool))), lambda x, c: c if c.arg else x),
    (UPat(Ops.AND, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
    (UPat(Ops.LOAD, src=(UPat.var("p"), UPat.var("i"), UPat.cvar("g"))), _gated_load),
    # integers only: floats are not associative, so no rule below ever sees one
    (UPat(Ops.MUL, INTS, src=(_int, UPat.const(0))), lambda x: x.const_like(0)),
    (UPat((Ops.ADD, Ops.SUB, Ops.NEG), INTS, name="x"), canonical_sum),
    (UPat(Ops.MUL, INTS, src=(UPat(Ops.ADD, name="x"), _c)), lambda x, c: canonical_sum(x * c)),
    (UPat(Ops.MUL, INTS, src=(_int * _a, _b)), lambda x, a, b: x * round_to(x.scalar_dtype, a.arg * b.arg)),
    (UPat(Ops.MUL, INTS, src=(_c, _int)), lambda c, x: x * c if x.op is not Ops.CONST else None),
    (_int // _c, fold_idiv),
    (_int % _c, fold_mod),
    ((_int // _a) // _b, lambda x, a, b: x // (a.arg * b.arg) if _positive(a, b) and _fits(x, a.arg * b.arg) else None),
    ((_int % _m) // _a, lambda x, m, a: (x // a) % (m.arg // a.arg) if _multiple_of(m, a) else None),
    ((_int % _m) % _n, lambda x, m, n: x % n if _multiple_of(m, n) else None),
    (UPat(Ops.COMPARISON, src=(_int, UPat.var("y", INTS)), name="cmp"), lambda cmp, x, y: decide_cmp(cmp)),
    (UPat(Ops.CMPLT, src=(_int, _c)), fold_cmplt_const),
    (UPat(Ops.MAX, INTS, src=(UPat.var("a"), UPat.var("b"))), _pick_max),
    (UPat(Ops.MIN, INTS, src=(UPat.var("a"), UPat.var("b"))), _pick_min),
]
# fmt: on
symbolic = ShapeKeepingMatcher(symbolic_rules)
# --8<-- [end:symbolic-rules]


def simplify(u: UOp) -> UOp:
    """`u` with constants folded and integer arithmetic in canonical form; never reassociates floats."""
    return graph_rewrite(u, symbolic)


# ---------------------------------------------------------------------------------------------------------
# CALL and PARAM
# ---------------------------------------------------------------------------------------------------------


# --8<-- [start:inline-call]
def inline_call(c: UOp) -> UOp:
    """The body of CALL `c` with its parameters replaced by the call's arguments.

    The bodies of CALLs nested inside are left alone: their PARAMs belong to them, not to `c`.
    """
    if c.op is not Ops.CALL:
        raise UOpError(f"inline_call: expected a CALL, got {c.op.name}")
    body, args = c.src[0], c.src[1:]
    return substitute(body, {p: args[p.arg] for p in call_body_params(body)}, enter_calls=False)


# --8<-- [end:inline-call]


# ---------------------------------------------------------------------------------------------------------
# run: evaluate a closed program by rewriting
# ---------------------------------------------------------------------------------------------------------


class RunError(ValueError):
    """The program is not closed (it reads a buffer, a parameter or a loop index) or has no defined value."""


def elements(x: UOp) -> list[UOp]:
    """The scalar elements of a STACK (or a scalar), in row-major order."""
    out: list[UOp] = []
    stack = [x]
    while stack:
        u = stack.pop()
        if u.op is Ops.STACK:
            stack.extend(reversed(u.src))
        else:
            out.append(u)
    return out


def from_elements(shape: tuple[int, ...], elems: list[UOp]) -> UOp:
    """The STACK of shape `shape` holding `elems` in row-major order."""
    level = elems
    for n in reversed(shape):
        level = [UOp(Ops.STACK, level[0].dtype, level[i : i + n]) for i in range(0, len(level), n)]
    return level[0]


def _unravel(i: int, shape: tuple[int, ...]) -> list[int]:
    idx = []
    for s in reversed(shape):
        i, r = divmod(i, s)
        idx.append(r)
    return idx[::-1]


def _ravel(idx: list[int], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, s in zip(idx, shape, strict=True):
        flat = flat * s + i
    return flat


def _source_index(m: UOp, out: list[int]) -> list[int] | None:
    """For movement op `m`, the source index its output index `out` reads; None inside PAD's fill."""
    shape, arg = m.src[0].shape, m.arg
    if m.op is Ops.RESHAPE:
        return _unravel(_ravel(out, m.shape), shape)
    if m.op is Ops.PERMUTE:
        src = [0] * len(out)
        for o, a in zip(out, arg, strict=True):
            src[a] = o
        return src
    if m.op is Ops.EXPAND:
        return [0 if s == 1 else o for o, s in zip(out, shape, strict=True)]
    if m.op is Ops.SHRINK:
        return [o + b for o, (b, _) in zip(out, arg, strict=True)]
    if m.op is Ops.FLIP:
        return [s - 1 - o if a in arg else o for a, (o, s) in enumerate(zip(out, shape, strict=True))]
    src = [o - b for o, (b, _) in zip(out, arg, strict=True)]  # PAD
    return src if all(0 <= i < s for i, s in zip(src, shape, strict=True)) else None


def move_elements(m: UOp) -> UOp:
    """A movement op on a constant, done element by element."""
    src, zero = elements(m.src[0]), UOp.const(round_to(m.scalar_dtype, 0), m.scalar_dtype)
    out = []
    for i in range(prod(m.shape)):
        j = _source_index(m, _unravel(i, m.shape))
        out.append(zero if j is None else src[_ravel(j, m.src[0].shape)])
    return from_elements(m.shape, out)


def _element(op: Ops, dtype: DType, srcs: tuple[UOp, ...]) -> UOp:
    """One element of an elementwise op or a reduction: folded at once when its operands are constants.

    Building the node and letting `fold_constants` fold it gives the same value, but costs one rule
    application per element, and the rewrite's budget would stop a large program for that alone."""
    if all(s.op is Ops.CONST for s in srcs):
        value = exec_alu(op, dtype, [s.arg for s in srcs])
        if value is not None:
            return UOp.const(value, dtype)
    return UOp(op, dtype, srcs)  # no defined value: the node stays, and `run` says why


def alu_elements(x: UOp) -> UOp | None:
    """An ALU op or CAST on STACKs, done element by element; scalars broadcast."""
    if not any(s.op is Ops.STACK for s in x.src):
        return None
    per_src = [elements(s) if s.op is Ops.STACK else [s] * prod(x.shape) for s in x.src]
    elems = [_element(x.op, x.scalar_dtype, srcs) for srcs in zip(*per_src, strict=True)]
    return from_elements(x.shape, elems)


def reduce_elements(r: UOp) -> UOp:
    """REDUCE_AXIS on a constant: each output element combines its group, in order, with the reduce op."""
    op, axes = r.arg
    src = r.src[0]
    groups: dict[int, list[UOp]] = {}
    for i, e in enumerate(elements(src)):
        idx = [0 if a in axes else v for a, v in enumerate(_unravel(i, src.shape))]
        groups.setdefault(_ravel(idx, r.shape), []).append(e)
    dtype = accumulator_dtype(op, r.scalar_dtype)
    sums = [_combine(op, dtype, [_widen(e, dtype) for e in groups[k]]) for k in range(prod(r.shape))]
    return from_elements(r.shape, [s.cast(r.scalar_dtype) for s in sums])


def _widen(e: UOp, dtype: DType) -> UOp:
    """An element in the accumulator's dtype; a constant stays a constant (float16 and bfloat16 widen exactly)."""
    if e.dtype is dtype:
        return e
    return UOp.const(e.arg, dtype) if e.op is Ops.CONST else e.cast(dtype)


def _combine(op: Ops, dtype: DType, elems: list[UOp]) -> UOp:
    """`elems` combined in order with `op`: as values while all are constants, one node at the end."""
    if not all(e.op is Ops.CONST for e in elems):
        acc = elems[0]
        for e in elems[1:]:
            acc = UOp(op, dtype, (acc, e))
        return acc
    value = elems[0].arg
    for e in elems[1:]:
        folded = exec_alu(op, dtype, [value, e.arg])
        assert folded is not None  # ADD, MUL, MAX and MIN are defined everywhere; only a CAST is not
        value = folded
    return UOp.const(value, dtype)


# --8<-- [start:interpreter-rules]
# fmt: off
interpreter = ShapeKeepingMatcher([
    *symbolic_rules,
    (UPat(Ops.CALL, name="c"), inline_call),
    (UPat((Ops.CONTIGUOUS, Ops.DETACH), src=(UPat.var("x"),)), lambda x: x),
    (UPat(Ops.ALU | {Ops.CAST}, name="x"), alu_elements),
    (UPat(Ops.MOVEMENT, src=(UPat((Ops.STACK, Ops.CONST)),), name="m"), move_elements),
    (UPat(Ops.REDUCE_AXIS, src=(UPat((Ops.STACK, Ops.CONST)),), name="r"), reduce_elements),
])
# fmt: on
# --8<-- [end:interpreter-rules]


# --8<-- [start:run]
DEFAULT_MAX_ELEMENTS = 1_000_000  # seconds of work (scripts/bench_ir.py): a test is smaller, an accident larger


def element_limit() -> int:
    """How many elements `run` may create: UOPC_IR_MAX_ELEMENTS, or DEFAULT_MAX_ELEMENTS."""
    text = os.environ.get("UOPC_IR_MAX_ELEMENTS")
    if text is None:
        return DEFAULT_MAX_ELEMENTS
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise RunError(f"UOPC_IR_MAX_ELEMENTS={text!r} is not a positive integer")
    return int(text)


def check_size(program: UOp, limit: int) -> None:
    """Refuse, before any work, a program whose nodes hold more than `limit` elements together.

    The interpreter makes one node per element of every shaped node, so this is the work and the memory
    `run` needs; an expand to 10^10 elements would otherwise run until it is killed."""
    nodes = program.toposort()
    total = sum(prod(u.shape) for u in nodes)
    if total > limit:
        big = max(nodes, key=lambda u: prod(u.shape))
        raise RunError(
            f"the program has {total:,} elements (the largest node, {big.op.name} of shape {big.shape}, has "
            f"{prod(big.shape):,}); run evaluates at most {limit:,} element by element. "
            "Raise the limit with UOPC_IR_MAX_ELEMENTS or run's max_elements"
        )


def run(program: UOp, max_elements: int | None = None) -> UOp:
    """Evaluate a closed program (no buffers, parameters or loops) to a CONST or a STACK of CONSTs.

    `max_elements` bounds the work (see `check_size`); by default UOPC_IR_MAX_ELEMENTS or 1,000,000."""
    check_size(program, element_limit() if max_elements is None else max_elements)
    result = graph_rewrite(program, interpreter)
    stuck = next((u for u in result.toposort() if u.op not in (Ops.CONST, Ops.STACK)), None)
    if stuck is not None:
        what = {
            Ops.PARAM: "reads a parameter outside any CALL",
            Ops.BUFFER: "reads a buffer",
            Ops.RANGE: "depends on a loop index",
            Ops.CAST: "has no defined value (a cast of inf, nan or an out-of-range float to an integer)",
        }
        reason = what.get(stuck.op, "belongs to a lowered kernel, not to a closed program")
        raise RunError(f"cannot evaluate the program: one {stuck.op.name} node {reason}")
    return result


# --8<-- [end:run]


def to_python(u: UOp) -> Any:
    """A CONST as its value and a STACK as nested lists."""
    if u.op is Ops.CONST:
        return u.arg
    shape = u.shape
    flat = [e.arg for e in elements(u)]
    for n in reversed(shape[1:]):
        flat = [flat[i : i + n] for i in range(0, len(flat), n)]
    return flat
