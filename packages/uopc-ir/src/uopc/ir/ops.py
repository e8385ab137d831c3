"""`Ops`: every kind of node the IR has, in groups that say which rules apply to each.

The enum is the IR's vocabulary. The groups (`Ops.ALU`, `Ops.MOVEMENT`, ...) are what rule tables, checks
and renderers test membership in, so a new op joins the rules of its group by being added to it.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Ops(enum.Enum):
    """Every kind of node. The groups below (`Ops.UNARY`, `Ops.BINARY`, ...) say which rules apply."""

    # values without inputs
    CONST = enum.auto()  # a scalar constant; arg is the value
    PARAM = enum.auto()  # the arg-th parameter of the CALL body it appears in
    CALL = enum.auto()  # src = (body, *arguments): the body with its PARAMs bound to the arguments
    STACK = enum.auto()  # a shaped constant: src are equal-shaped elements along a new leading axis
    # unary ALU
    NEG = enum.auto()
    EXP = enum.auto()
    LOG = enum.auto()
    SQRT = enum.auto()
    SIN = enum.auto()
    COS = enum.auto()
    # binary ALU
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    DIV = enum.auto()  # true division, floats only
    IDIV = enum.auto()  # floor division, as Python's // (of floats too)
    MOD = enum.auto()  # floor modulo (the sign of the divisor), as Python's %
    POW = enum.auto()  # floats only
    MAX = enum.auto()
    MIN = enum.auto()
    CMPLT = enum.auto()
    CMPEQ = enum.auto()
    CMPNE = enum.auto()
    AND = enum.auto()
    OR = enum.auto()
    XOR = enum.auto()
    # ternary ALU
    WHERE = enum.auto()  # src = (condition, value if true, value if false)
    CAST = enum.auto()  # convert the value of src[0] to dtype
    # movement: shaped graphs only; each one is an index transform
    RESHAPE = enum.auto()
    PERMUTE = enum.auto()
    EXPAND = enum.auto()
    SHRINK = enum.auto()
    PAD = enum.auto()  # fills with zero of the dtype
    FLIP = enum.auto()
    # identities that carry a meaning for the Tensor library
    CONTIGUOUS = enum.auto()  # the value of src[0], computed into a buffer of its own (a kernel boundary)
    DETACH = enum.auto()  # the value of src[0], through which no gradient flows
    # reductions
    REDUCE_AXIS = enum.auto()  # shaped: arg = (op, axes); reduced axes keep size 1
    REDUCE = enum.auto()  # lowered: src = (value, *ranges); arg = op
    # memory
    BUFFER = enum.auto()  # shaped: a flat input array; arg = BufferArg(slot, size)
    DEFINE_GLOBAL = enum.auto()  # lowered: a kernel's pointer parameter; arg = BufferArg(slot, size)
    LOAD = enum.auto()  # src = (pointer, index) or (pointer, index, gate); arg: None, or a prefetch hint (UOp.load)
    STORE = enum.auto()  # src = (pointer, index, value) or (pointer, index, value, gate)
    DEFINE_ACC = enum.auto()  # src = (initial value, *enclosing ranges); arg = accumulator number
    ACCUMULATE = enum.auto()  # src = (accumulator, value, *reduce ranges); arg = op: acc = op(acc, value)
    # (arg None: acc = value, a recurrence whose value reads accumulators, as online softmax's running max)
    # loops
    RANGE = enum.auto()  # a loop index in [0, src[0]); arg = RangeArg(axis, kind)
    END = enum.auto()  # src = (statement, *ranges): the loops over ranges close after the statement
    ENDRANGE = enum.auto()  # in a linearized program only: the closing brace of src[0]'s loop
    SINK = enum.auto()  # gathers several roots into one graph
    # GPU programs: the threads of a block working together
    BARRIER = enum.auto()  # src = (shared buffer, *stores): the buffer once every thread of the block has stored
    SHUFFLE = enum.auto()  # src = (value, lane): the value that lane `lane` (mod 32) of this thread's warp holds
    MMA = enum.auto()  # src = 8 A and 4 B values of a lane; arg = i: element i of its D fragment (m16n8k16)

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    # members are singletons, so identity hashing is exact, and much faster than Enum's hash of the name
    __hash__ = object.__hash__

    UNARY: ClassVar[frozenset[Ops]]
    BINARY: ClassVar[frozenset[Ops]]
    TERNARY: ClassVar[frozenset[Ops]]
    ALU: ClassVar[frozenset[Ops]]
    COMPARISON: ClassVar[frozenset[Ops]]
    COMMUTATIVE: ClassVar[frozenset[Ops]]
    MOVEMENT: ClassVar[frozenset[Ops]]
    REDUCE_OPS: ClassVar[frozenset[Ops]]


Ops.UNARY = frozenset({Ops.NEG, Ops.EXP, Ops.LOG, Ops.SQRT, Ops.SIN, Ops.COS})
Ops.BINARY = frozenset(
    {Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.IDIV, Ops.MOD, Ops.POW, Ops.MAX, Ops.MIN}
    | {Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR}
)
Ops.TERNARY = frozenset({Ops.WHERE})
Ops.ALU = Ops.UNARY | Ops.BINARY | Ops.TERNARY
Ops.COMPARISON = frozenset({Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE})
Ops.COMMUTATIVE = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.MIN, Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR})
Ops.MOVEMENT = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.PAD, Ops.FLIP})
Ops.REDUCE_OPS = frozenset({Ops.ADD, Ops.MAX, Ops.MIN, Ops.MUL})
"""The ops a reduction may combine values with."""
