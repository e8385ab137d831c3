"""Simplification: a rule table that rewrites integer index arithmetic into short, canonical sums.

Lowering produces index expressions such as ((i*4 + j) // 4) % 8; `simplify` rewrites them until no rule
applies: constants fold with the reference semantics (alu.py), sums become canonical (`linear_terms`,
`build_sum`), and divisions, remainders and comparisons are decided with interval bounds (bounds.py).
Floats are never reassociated: their rules are identities that hold exactly.
"""

from __future__ import annotations

import hashlib
import math
import weakref
from typing import Any

from uopc.ir.alu import exec_alu
from uopc.ir.bounds import bounds, compare_intervals, never_wraps, vmax, vmin
from uopc.ir.dtype import DType, dtypes
from uopc.ir.ops import Ops
from uopc.ir.rewrite import PatternMatcher, Rule, RuleFn, UPat, graph_rewrite
from uopc.ir.uop import UOp, round_to, toposort

INTS = tuple(d for d in dtypes.all() if d.is_int)


# ---------------------------------------------------------------------------------------------------------
# Canonical sums: an integer expression as constant + sum of coefficient * term
# ---------------------------------------------------------------------------------------------------------


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


def fold_idiv(x: UOp, c: UOp) -> UOp | None:
    """x // c: the terms divisible by c leave the division; what is left is decided by its bounds."""
    k = int(c.arg)
    if k <= 0 or not never_wraps(x):
        return None
    quotient, rest, g = _split_by(x, k)
    lo, hi = (int(b) for b in bounds(rest))
    if lo // k == hi // k:
        return quotient + rest.const_like(lo // k)
    coarse = _coarse_part(rest, k)
    if coarse is not None:  # (g*y + r) // (g*d) == y // d for 0 <= r < g
        y, g_y = coarse
        return quotient + y // (k // g_y)
    if quotient.op is Ops.CONST and quotient.arg == 0:
        if g > 1:  # (g*y) // (g*d) == y // d
            return _divide_exactly(rest, g) // (k // g)
        return None
    return quotient + rest // c


def _coarse_part(x: UOp, k: int) -> tuple[UOp, int] | None:
    """(y, g), where x = g*y + r with g > 1 dividing k and 0 <= r < g: the terms whose coefficients g divides, over
    g, leaving a remainder r too small to reach the next multiple of g. A thread's row (128 t) plus a
    position in it (r < 32), divided by 512, is t // 4: the position drops out of the division, which no
    longer changes inside the position's loop. None where no such g is found (the largest is tried first)."""
    terms, constant = linear_terms(x)
    for g in sorted({math.gcd(k, c) for c in terms.values()} - {1}, reverse=True):
        coarse = {t: c // g for t, c in terms.items() if c % g == 0}
        fine = build_sum({t: c for t, c in terms.items() if c % g}, constant % g, x.scalar_dtype)
        lo, hi = bounds(fine)
        if coarse and lo >= 0 and hi < g:
            return build_sum(coarse, constant // g, x.scalar_dtype), g
    return None


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
    decided = compare_intervals(cmp.op, bounds(cmp.src[0]), bounds(cmp.src[1]))
    return None if decided is None else UOp.const(decided)


def fold_constants(x: UOp) -> UOp | None:
    if not all(s.op is Ops.CONST for s in x.src):
        return None
    value = exec_alu(x.op, x.scalar_dtype, [s.arg for s in x.src])
    return None if value is None else UOp.const(value, x.scalar_dtype)


def fold_by_bounds(x: UOp) -> UOp | None:
    """An integer expression whose bounds meet is that constant."""
    lo, hi = bounds(x)
    return UOp.const(lo, x.scalar_dtype) if lo == hi else None


def _gated_load(x: UOp, p: UOp, i: UOp, g: UOp) -> UOp:
    """A load whose gate is decided: a plain load (keeping its prefetch hint), or no load at all and the value 0."""
    return p.load(i, prefetch=x.arg) if g.arg else UOp.const(round_to(p.scalar_dtype, 0), p.scalar_dtype)


def _gated_store(p: UOp, i: UOp, v: UOp, g: UOp) -> UOp | None:
    return p.store(i, v) if g.arg else None


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


_x, _int, _c = UPat.var("x"), UPat.var("x", INTS), UPat.cvar("c", INTS)
_a, _b, _m, _n = (UPat.cvar(k, INTS) for k in "abmn")

# Each rule is written as the algebra it applies, and its comment says the rewrite and the values it holds for.
# fmt: off
symbolic_rules: list[tuple[UPat, RuleFn]] = [
    # Constants fold with the reference semantics; so does any integer expression whose bounds meet.
    (UPat(Ops.ALU | {Ops.CAST}, name="x"), fold_constants),  # 2 + 3 -> 5
    (UPat(Ops.ALU - Ops.COMPARISON, INTS, name="x"), fold_by_bounds),  # vmin(x) == vmax(x) == k -> k
    # Identities that hold exactly, for every dtype.
    (_x * UPat.cvar("one"), lambda x, one: x if one.arg == 1 else None),  # x * 1 -> x
    (_x / 1.0, lambda x: x),  # x / 1.0 -> x
    (_x - 0.0, lambda x: x),  # x - 0.0 -> x (but x + 0.0 is not x: -0.0 + 0.0 is +0.0)
    (UPat.var("c").where(UPat.var("a"), UPat.var("a")), lambda c, a: a),  # c ? a : a -> a
    (UPat.cvar("c").where(UPat.var("a"), UPat.var("b")), lambda c, a, b: a if c.arg else b),  # true ? a : b -> a
    (UPat.var("x", dtypes.bool).logical_not().logical_not(), lambda x: x),  # not not x -> x
    (_x & UPat.cvar("c", dtypes.bool), lambda x, c: x if c.arg else c),  # x & true -> x, x & false -> false
    (_x | UPat.cvar("c", dtypes.bool), lambda x, c: c if c.arg else x),  # x | true -> true, x | false -> x
    (_x & _x, lambda x: x),  # x & x -> x
    # load(p, i, gate=true) -> load(p, i), and load(p, i, gate=false) -> 0
    (UPat(Ops.LOAD, src=(UPat.var("p"), UPat.var("i"), UPat.cvar("g")), name="x"), _gated_load),
    # store(p, i, v, gate=true) -> store(p, i, v); a false gate stays (a statement cannot fold to nothing)
    (UPat(Ops.STORE, src=(UPat.var("p"), UPat.var("i"), UPat.var("v"), UPat.cvar("g"))), _gated_store),
    # Integers only: floats are not associative, so no rule below ever sees one.
    (_int * 0, lambda x: x.const_like(0)),  # x * 0 -> 0 (for floats inf * 0 is nan)
    (UPat((Ops.ADD, Ops.SUB, Ops.NEG), INTS, name="x"), canonical_sum),  # b + 2*a - b -> a*2, terms sorted
    (UPat(Ops.ADD, name="x") * _c, lambda x, c: canonical_sum(x * c)),  # (a + b) * c -> a*c + b*c
    ((_int * _a) * _b, lambda x, a, b: x * round_to(x.scalar_dtype, a.arg * b.arg)),  # (x*a)*b -> x*(a*b)
    (_c * _int, lambda c, x: x * c if x.op is not Ops.CONST else None),  # c * x -> x * c
    (_int // _c, fold_idiv),  # (c*q + r) // c -> q + r // c, and r // c decided by the bounds of r
    (_int % _c, fold_mod),  # (c*q + r) % c -> r % c, and r % c -> r when 0 <= r < c
    # (x // a) // b -> x // (a*b), for a, b > 0
    ((_int // _a) // _b, lambda x, a, b: x // (a.arg * b.arg) if _positive(a, b) and _fits(x, a.arg * b.arg) else None),
    # (x % m) // a -> (x // a) % (m // a), and (x % m) % n -> x % n, where a (or n) divides m
    ((_int % _m) // _a, lambda x, m, a: (x // a) % (m.arg // a.arg) if _multiple_of(m, a) else None),
    ((_int % _m) % _n, lambda x, m, n: x % n if _multiple_of(m, n) else None),
    # x < y -> true when vmax(x) < vmin(y), false when vmin(x) >= vmax(y); == and != likewise
    (UPat(Ops.COMPARISON, src=(_int, UPat.var("y", INTS)), name="cmp"), lambda cmp, x, y: decide_cmp(cmp)),
    (_int < _c, fold_cmplt_const),  # x + k < c -> x < c - k, and g*y < c -> y < ceil(c / g)
    (UPat.var("a", INTS).maximum(UPat.var("b")), _pick_max),  # max(a, b) -> a when vmin(a) >= vmax(b)
    (UPat.var("a", INTS).minimum(UPat.var("b")), _pick_min),  # min(a, b) -> a when vmax(a) <= vmin(b)
]
# fmt: on
symbolic = ShapeKeepingMatcher(symbolic_rules)


def simplify(u: UOp, memo: dict[UOp, UOp] | None = None) -> UOp:
    """`u` with constants folded and integer arithmetic in canonical form; never reassociates floats.

    A `memo` shared by several calls keeps each node's simplified form for the next: the rules look at
    nothing but the node, so a node's form is the same in every graph it is part of. The caller owns it,
    and decides how long it holds the nodes in it alive."""
    return graph_rewrite(u, symbolic, memo=memo)
