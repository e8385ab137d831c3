"""Interval bounds: every integer expression lies in [vmin, vmax], found by interval arithmetic.

`bounds` walks a graph once, bottom-up, and caches each node's interval on the node. A node whose value
may wrap around its dtype claims the dtype's whole range, so a rule that reads a bound never trusts a sum
that overflowed. The simplification rules decide divisions, remainders and comparisons with these bounds.
"""

from __future__ import annotations

from collections.abc import Callable

from uopc.ir.dtype import dtypes
from uopc.ir.ops import Ops
from uopc.ir.uop import ConstValue, UOp, toposort

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
    decided = compare_intervals(u.op, a, b)
    return (0, 1) if decided is None else (int(decided), int(decided))


def compare_intervals(op: Ops, a: Interval, b: Interval) -> bool | None:
    """The value of `a <op> b` for every pair of values in the two intervals, or None if it varies."""
    if op is Ops.CMPLT:
        return True if a[1] < b[0] else False if a[0] >= b[1] else None
    disjoint = a[1] < b[0] or b[1] < a[0]
    same_point = a[0] == a[1] == b[0] == b[1]
    if not (disjoint or same_point):
        return None
    return same_point if op is Ops.CMPEQ else disjoint


def _bounds_where(u: UOp, c: Interval, a: Interval, b: Interval) -> Interval:
    if c[0] == c[1]:
        return a if c[0] else b
    return min(a[0], b[0]), max(a[1], b[1])


def _bounds_cast(u: UOp, a: Interval) -> Interval | None:
    return a if not u.src[0].scalar_dtype.is_float else None


# Each entry maps source intervals to the node's interval; None means "anything the dtype holds".
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


def bounds(u: UOp) -> Interval:
    """The interval [vmin, vmax] that every value of `u` lies in; cached on the node."""
    if u._bounds is None:
        for n in toposort(u, lambda x: [s for s in x.src if s._bounds is None]):
            n._bounds = _bounds_of(n)
    assert u._bounds is not None
    return u._bounds


def vmin(u: UOp) -> ConstValue:
    return bounds(u)[0]


def vmax(u: UOp) -> ConstValue:
    return bounds(u)[1]


def never_wraps(*xs: UOp) -> bool:
    """True when bounds prove each sum below was computed without wrapping around its dtype.

    Sums and products wrap (exec_alu's semantics), and reordering them is exact modulo 2**bits; division,
    remainder and comparison are not, so their rules must know nothing wrapped. A sum that may wrap has
    the full range of its dtype as bounds, since interval arithmetic claims nothing then.
    """
    return all(bounds(x) != (x.scalar_dtype.min, x.scalar_dtype.max) for x in xs)
