"""Reference semantics: the value of every ALU op on constants, the one place that says what an op means.

`exec_alu` is what `IDIV` of two negative int32s is, what `MAX` does with a NaN, what a cast of 1e10 to int8
gives. Constant folding computes with it, the interpreter (`run`) evaluates programs with it, and every
backend is tested against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from uopc.ir.dtype import DType
from uopc.ir.ops import Ops
from uopc.ir.uop import ConstValue, round_to


def _floordiv(a: ConstValue, b: ConstValue) -> ConstValue:
    """Floor division; of integers by zero it gives 0, numpy's answer, which the C backend's helper also gives."""
    if isinstance(a, float) or isinstance(b, float):
        return _float_divmod(float(a), float(b))[0]
    return 0 if b == 0 else int(a) // int(b)


def _floormod(a: ConstValue, b: ConstValue) -> ConstValue:
    if isinstance(a, float) or isinstance(b, float):
        return _float_divmod(float(a), float(b))[1]
    return 0 if b == 0 else int(a) % int(b)


def _float_divmod(a: float, b: float) -> tuple[float, float]:
    """numpy's floor division and modulo of floats. Python's divmod is the same algorithm (the remainder is
    fmod's, moved to the divisor's sign; -1.0 % inf is inf); by zero numpy gives a / b and NaN where Python
    raises."""
    if b == 0:
        return _fdiv(a, b), math.nan
    return divmod(a, b)


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
