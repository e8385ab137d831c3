"""Python's operators on IR values, written once for the three kinds of value that have them.

A `UOp` builds a node, a `UPat` builds a pattern that matches such a node, and a `Tensor` builds a lazy
tensor: `x + 1` means the same ADD in all three. Each class inherits `OpMixin` and supplies one method,
`_alu(op, *operands, reverse=False)`, which also holds its rule for lifting a Python number into an operand
of its kind (a UOp makes a constant of the other operand's dtype, a UPat a pattern for that constant, a
Tensor promotes and broadcasts as numpy does). `==` and `!=` are not here: a UOp and a UPat compare by
identity, since they are dictionary keys, and spell elementwise equality `.eq()` and `.ne()`; a Tensor
defines its own elementwise `==`.
"""

from __future__ import annotations

from typing import Any, Generic, Self, TypeVar

from uopc.ir.ops import Ops

NumberT = TypeVar("NumberT")
"""The Python numbers (and, for a Tensor, numpy scalars) that an operator lifts next to a value."""


class OpMixin(Generic[NumberT]):
    """The operators of an IR value. A subclass supplies `_alu`, `_is_float` for <= and >= (or defines them
    itself), and `_is_operand` if it takes more kinds of operand than its own and Python's numbers."""

    __slots__ = ()

    def _alu(self, op: Ops, *operands: Any, reverse: bool = False) -> Self:
        """`op` applied to self and `operands` (to `operands` and then self, with `reverse`): the one method
        each class writes, and the one place it turns a Python number into an operand."""
        raise NotImplementedError(f"{type(self).__name__} does not define _alu")

    def _is_operand(self, x: object) -> bool:
        """What an operator takes beside self: a value of its own kind or a Python number."""
        return isinstance(x, (type(self), bool, int, float))

    def _binop(self, op: Ops, x: object, reverse: bool = False) -> Self:
        """An operator's result; for an operand of another type, NotImplemented, so Python asks that operand."""
        return self._alu(op, x, reverse=reverse) if self._is_operand(x) else NotImplemented

    def _is_float(self) -> bool:
        """Whether the values may be NaN, so that <= and >= must be spelled to be false for NaN."""
        raise NotImplementedError(f"{type(self).__name__} does not define _is_float")

    # ---- arithmetic: a op b, and b op a for a Python number b on the left ----
    def __add__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.ADD, x)

    def __radd__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.ADD, x, reverse=True)

    def __sub__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.SUB, x)

    def __rsub__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.SUB, x, reverse=True)

    def __mul__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.MUL, x)

    def __rmul__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.MUL, x, reverse=True)

    def __truediv__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.DIV, x)

    def __rtruediv__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.DIV, x, reverse=True)

    def __floordiv__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.IDIV, x)

    def __rfloordiv__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.IDIV, x, reverse=True)

    def __mod__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.MOD, x)

    def __rmod__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.MOD, x, reverse=True)

    def __pow__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.POW, x)

    def __rpow__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.POW, x, reverse=True)

    def __neg__(self) -> Self:
        return self._alu(Ops.NEG)

    # ---- bitwise, and logical on bools ----
    def __and__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.AND, x)

    def __rand__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.AND, x, reverse=True)

    def __or__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.OR, x)

    def __ror__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.OR, x, reverse=True)

    def __xor__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.XOR, x)

    def __rxor__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.XOR, x, reverse=True)

    # ---- comparisons: the IR has <, == and != only ----
    def __lt__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.CMPLT, x)

    def __gt__(self, x: Self | NumberT) -> Self:
        return self._binop(Ops.CMPLT, x, reverse=True)  # a > b is b < a

    # "not (a > b)" is one op fewer, but true where a or b is NaN; floats need "a < b or a == b" (false for NaN)
    def __le__(self, x: Self | NumberT) -> Self:
        if not self._is_operand(x):
            return NotImplemented
        return (self < x) | self.eq(x) if self._is_float() else (self > x).logical_not()

    def __ge__(self, x: Self | NumberT) -> Self:
        if not self._is_operand(x):
            return NotImplemented
        return (self > x) | self.eq(x) if self._is_float() else (self < x).logical_not()

    def eq(self, x: Self | NumberT) -> Self:
        """Elementwise ==."""
        return self._alu(Ops.CMPEQ, x)

    def ne(self, x: Self | NumberT) -> Self:
        """Elementwise !=."""
        return self._alu(Ops.CMPNE, x)

    def logical_not(self) -> Self:
        return self._alu(Ops.CMPNE, True)

    # ---- the operators by the method names PyTorch users type ----
    def add(self, x: Self | NumberT) -> Self:
        return self + x

    def sub(self, x: Self | NumberT) -> Self:
        return self - x

    def mul(self, x: Self | NumberT) -> Self:
        return self * x

    def div(self, x: Self | NumberT) -> Self:
        """True division, self / x."""
        return self / x

    def neg(self) -> Self:
        return -self

    def pow(self, x: Self | NumberT) -> Self:
        return self**x

    # ---- named ops ----
    def maximum(self, x: Self | NumberT) -> Self:
        return self._alu(Ops.MAX, x)

    def minimum(self, x: Self | NumberT) -> Self:
        return self._alu(Ops.MIN, x)

    def where(self, a: Self | NumberT, b: Self | NumberT) -> Self:
        """`a` where self (a condition) is true, else `b`."""
        return self._alu(Ops.WHERE, a, b)

    def exp(self) -> Self:
        return self._alu(Ops.EXP)

    def log(self) -> Self:
        return self._alu(Ops.LOG)

    def sqrt(self) -> Self:
        return self._alu(Ops.SQRT)

    def sin(self) -> Self:
        return self._alu(Ops.SIN)

    def cos(self) -> Self:
        return self._alu(Ops.COS)
