"""Exercise 3.1: C's truncating division, built from uopc's floor division."""

from uopc.ir import UOp


def trunc_div(a: UOp, b: UOp) -> UOp:
    """a / b rounded toward zero, as C computes it for ints.

    Floor division rounds toward minus infinity. The two differ exactly when the division is inexact
    (the remainder is not 0) and the true quotient is negative (a and b have different signs); then the
    truncated quotient is the floor plus one.
    """
    q, r = a // b, a % b
    inexact = r.ne(0)
    negative = (a < 0).ne(b < 0)
    return (inexact & negative).where(q + 1, q)
