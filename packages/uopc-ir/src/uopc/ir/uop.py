"""The one data structure of uopc: `UOp(op, dtype, src, arg)`, an immutable, hash-consed graph node.

Every program the compiler sees, from a user's tensor expression to the loops it becomes, is a graph of
UOps. A UOp is never changed after it is built: passes build new graphs. Building a node that already
exists returns the existing object (hash consing), so two structurally equal graphs are one object and
`is` compares whole graphs in constant time.
"""

from __future__ import annotations

import enum
import math
import struct
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, NamedTuple, TypeGuard

from uopc.ir.dtype import AddrSpace, AnyDType, DType, PtrDType, dtypes, promote
from uopc.ir.errors import UOpError
from uopc.ir.operators import OpMixin
from uopc.ir.ops import Ops


def accumulator_dtype(op: Ops, dtype: DType) -> DType:
    """The type a reduction of `dtype` values with `op` accumulates in; its result is rounded back to `dtype`.

    A float16 sum of 4096 ones would stop at 2048 (2048 + 1 rounds back to 2048), so float16 and bfloat16
    sums and products accumulate in float32, as numpy's do. A max or a min picks one of its inputs and
    needs no wider type."""
    if op in (Ops.ADD, Ops.MUL) and dtype in (dtypes.float16, dtypes.bfloat16):
        return dtypes.float32
    return dtype


class AxisType(enum.Enum):
    """What a loop range is for; the renderer and the optimizer treat each kind differently."""

    LOOP = "loop"  # an output axis, one iteration per output element
    REDUCE = "reduce"  # a reduction axis, iterated to update an accumulator
    THREAD = "thread"  # an output axis split across CPU threads (an OpenMP parallel loop)
    UPCAST = "upcast"  # an output axis unrolled into several registers
    UNROLL = "unroll"  # a reduction axis unrolled into straight-line code
    GROUP = "group"  # an output axis spread over the blocks of a GPU grid: one value per block (blockIdx)
    LOCAL = "local"  # an axis spread over the threads of one GPU block: one value per thread (threadIdx)
    VECTOR = "vector"  # an output axis whose iterations are the lanes of one SIMD register: no loop at all


class RangeArg(NamedTuple):
    axis: int  # a number unique within the kernel: it names the loop variable
    kind: AxisType


class BufferArg(NamedTuple):
    slot: int  # which argument of the program or kernel
    size: int  # number of elements


Shape = tuple[int, ...]
ConstValue = bool | int | float


def _argkey(arg: Any) -> Any:
    """The hash-consing key of an arg: 1, 1.0 and True differ, and so do 0.0 and -0.0; nan equals nan."""
    if isinstance(arg, float):  # every nan one key: folding inf - inf gives a nan with the sign bit set
        return (float, b"nan" if math.isnan(arg) else struct.pack("<d", arg))
    if isinstance(arg, tuple):
        return (type(arg), tuple(_argkey(a) for a in arg))
    return (type(arg), arg)


def round_to(dtype: DType, value: ConstValue) -> ConstValue:
    """`value` as `dtype` holds it: floats rounded to the type's precision, integers wrapped to its width."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_int:
        v = int(value) & ((1 << dtype.bits) - 1)
        return v - (1 << dtype.bits) if dtype.kind == "int" and v > dtype.max else v
    # an int is rounded once, to the type's precision: through float64 it could be rounded twice. bfloat16 is
    # the exception: every value reaches it through float32 (as in PyTorch, and in the C backend)
    precision = _PRECISION[dtypes.float32 if dtype is dtypes.bfloat16 else dtype]
    try:
        x = float(_round_int(value, precision) if isinstance(value, int) else value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    if dtype is dtypes.float64 or math.isnan(x) or math.isinf(x):
        return x
    if dtype is dtypes.bfloat16:  # round to nearest even on the top 16 bits of the float32
        (bits,) = struct.unpack("<I", struct.pack("<f", _to_f32(x)))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return float(struct.unpack("<f", struct.pack("<I", bits))[0])
    return _to_f32(x) if dtype is dtypes.float32 else _to_f16(x)


_PRECISION = {dtypes.float16: 11, dtypes.bfloat16: 8, dtypes.float32: 24, dtypes.float64: 53}
"""Significant bits of each float type, the implicit leading bit included."""


def _round_int(v: int, bits: int) -> int:
    """`v` rounded to `bits` significant bits, ties to even: then a float of that precision holds it exactly."""
    extra = abs(v).bit_length() - bits
    if extra <= 0:
        return v
    q, r = divmod(abs(v), 1 << extra)
    half = 1 << (extra - 1)
    q += r > half or (r == half and q & 1)
    return (q << extra) * (-1 if v < 0 else 1)


def _to_f32(x: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def _to_f16(x: float) -> float:
    try:
        return float(struct.unpack("<e", struct.pack("<e", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def prod(xs: Iterable[int]) -> int:
    return math.prod(xs)


class UOp(OpMixin[ConstValue]):
    """One node: an op, the type of its value, its source nodes, and an op-specific argument.

    The constructor looks the node up before building it, so structurally equal nodes are one object.
    The lookup table holds its nodes weakly: a node nothing refers to is freed.
    """

    __slots__ = ("__weakref__", "_bounds", "_order", "arg", "dtype", "op", "shape", "src")
    _cache: ClassVar[weakref.WeakValueDictionary[tuple[Any, ...], UOp]] = weakref.WeakValueDictionary()

    op: Ops
    dtype: AnyDType
    src: tuple[UOp, ...]
    arg: Any
    shape: Shape
    _bounds: tuple[ConstValue, ConstValue] | None
    _order: tuple[UOp, ...] | None  # toposort's answer but the node, kept: a node never changes, nor its order

    def __new__(cls, op: Ops, dtype: AnyDType, src: Sequence[UOp] = (), arg: Any = None) -> UOp:
        src = tuple(src)
        key = (op, dtype, src, _argkey(arg))
        found = UOp._cache.get(key)
        if found is not None:
            return found
        self = object.__new__(cls)
        self.op, self.dtype, self.src, self.arg, self._bounds, self._order = op, dtype, src, arg, None, None
        self.shape = check_node(self)
        UOp._cache[key] = self
        return self

    # UOps are compared by identity: hash consing made identity mean structural equality.
    __hash__ = object.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as .uir text: flat, so a deep graph pickles without deep recursion, and exact."""
        from uopc.ir.uir import parse, to_uir

        return (parse, (to_uir(self),))

    def __repr__(self) -> str:
        arg = "" if self.arg is None else f", arg={self.arg!r}"
        return f"UOp({self.op!r}, {self.dtype!r}, src=<{len(self.src)}>{arg})"

    def replace(self, **kw: Any) -> UOp:
        """This node with some of op, dtype, src and arg changed."""
        return UOp(kw.get("op", self.op), kw.get("dtype", self.dtype), kw.get("src", self.src), kw.get("arg", self.arg))

    @property
    def scalar_dtype(self) -> DType:
        """The element type: `dtype` itself, or what a pointer points to."""
        return self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype

    @property
    def size(self) -> int:
        return prod(self.shape)

    def toposort(self) -> list[UOp]:
        return toposort(self)

    # ---- named constructors ----
    @staticmethod
    def const(value: ConstValue, dtype: DType | None = None) -> UOp:
        """A scalar constant; the dtype defaults to bool, int32 or float32 by the Python type."""
        if dtype is None:
            dtype = dtypes.from_python(value)
        if dtype.is_float and isinstance(value, (int, float)):
            value = float(round_to(dtype, value))  # 0.1 becomes the float32 nearest to it
        return UOp(Ops.CONST, dtype, (), value)

    def const_like(self, value: ConstValue) -> UOp:
        """A constant of this node's dtype; broadcast to its shape by ALU ops, which accept scalars."""
        return UOp.const(value, self.scalar_dtype)

    @staticmethod
    def buffer(slot: int, size: int, dtype: DType = dtypes.float32) -> UOp:
        return UOp(Ops.BUFFER, dtype, (), BufferArg(slot, size))

    @staticmethod
    def define_global(slot: int, size: int, dtype: DType = dtypes.float32) -> UOp:
        return UOp(Ops.DEFINE_GLOBAL, dtype.ptr(AddrSpace.GLOBAL), (), BufferArg(slot, size))

    def cast(self, dtype: DType) -> UOp:
        return self if self.dtype is dtype else UOp(Ops.CAST, dtype, (self,))

    def alu(self, op: Ops, *others: UOp | ConstValue) -> UOp:
        """Apply an ALU op to this node and `others`; Python numbers become constants of a fitting dtype."""
        return self._alu(op, *others)

    def _alu(self, op: Ops, *operands: UOp | ConstValue, reverse: bool = False) -> UOp:
        """The node for `op` on this node and `operands` (the operator layer's one hook, see operators.py)."""
        srcs = (*operands, self) if reverse else (self, *operands)
        nodes = srcs if _all_nodes(srcs) else _lift_numbers(op, srcs)
        # a comparison is bool; anything else has its operands' dtype, which for a WHERE is that of its branches
        dtype = dtypes.bool if op in Ops.COMPARISON else nodes[-1].dtype
        return UOp(op, dtype, nodes)

    def _is_float(self) -> bool:
        return self.scalar_dtype.is_float

    # ---- movement and reduction on shaped graphs ----
    def reshape(self, shape: Sequence[int]) -> UOp:
        shape = tuple(shape)
        return self if shape == self.shape else UOp(Ops.RESHAPE, self.dtype, (self,), shape)

    def permute(self, order: Sequence[int]) -> UOp:
        order = tuple(order)
        return self if order == tuple(range(len(self.shape))) else UOp(Ops.PERMUTE, self.dtype, (self,), order)

    def expand(self, shape: Sequence[int]) -> UOp:
        shape = tuple(shape)
        return self if shape == self.shape else UOp(Ops.EXPAND, self.dtype, (self,), shape)

    def shrink(self, bounds: Sequence[tuple[int, int]]) -> UOp:
        bounds = tuple((int(b), int(e)) for b, e in bounds)
        if bounds == tuple((0, s) for s in self.shape):
            return self
        return UOp(Ops.SHRINK, self.dtype, (self,), bounds)

    def pad(self, widths: Sequence[tuple[int, int]]) -> UOp:
        widths = tuple((int(b), int(a)) for b, a in widths)
        if all(b == a == 0 for b, a in widths) and len(widths) == len(self.shape):
            return self
        return UOp(Ops.PAD, self.dtype, (self,), widths)

    def flip(self, axes: Sequence[int]) -> UOp:
        axes = tuple(sorted(axes))
        return self if not axes else UOp(Ops.FLIP, self.dtype, (self,), axes)

    def reduce(self, op: Ops, axes: Sequence[int]) -> UOp:
        """Combine values along `axes` with `op`; the reduced axes keep size 1."""
        return UOp(Ops.REDUCE_AXIS, self.dtype, (self,), (op, tuple(sorted(axes))))

    def sum(self, axes: Sequence[int]) -> UOp:
        return self.reduce(Ops.ADD, axes)

    # ---- memory and loops in lowered graphs ----
    def load(self, index: UOp, gate: UOp | None = None, prefetch: int | None = None) -> UOp:
        """Read element `index` of this pointer; where `gate` is false nothing is read and the value is 0.
        `prefetch` (the arg) is a hint, not a read: the element `prefetch` places after `index` will be read
        soon, so a backend may ask the cache for it now. The value is the same with or without it."""
        src = (self, index) if gate is None else (self, index, gate)
        return UOp(Ops.LOAD, self.scalar_dtype, src, prefetch)

    def store(self, index: UOp, value: UOp, gate: UOp | None = None) -> UOp:
        """Write `value` to element `index` of this pointer; where `gate` is false nothing is written."""
        src = (self, index, value) if gate is None else (self, index, value, gate)
        return UOp(Ops.STORE, dtypes.void, src)

    def end(self, *ranges: UOp) -> UOp:
        """Close the loops over `ranges` after this statement."""
        dtype = self.dtype if self.op in (Ops.ACCUMULATE, Ops.END) else dtypes.void
        return UOp(Ops.END, dtype, (self, *ranges))


def _all_nodes(srcs: tuple[UOp | ConstValue, ...]) -> TypeGuard[tuple[UOp, ...]]:
    for s in srcs:  # noqa: SIM110 (a loop, not all(): operators are the hottest path of every pass)
        if not isinstance(s, UOp):
            return False
    return True


def _lift_numbers(op: Ops, srcs: tuple[UOp | ConstValue, ...]) -> tuple[UOp, ...]:
    """The scalar-lifting rule: a Python number next to a node becomes a constant of that node's dtype, so
    2 * x keeps x's type; in a WHERE it takes the dtype of the other branch (both numbers: the first one's).
    A float never silently becomes an integer constant."""
    values = srcs[1:] if op is Ops.WHERE else srcs
    nodes = [s for s in values if isinstance(s, UOp)]
    numbers = [s for s in values if not isinstance(s, UOp)]
    dtype = nodes[0].scalar_dtype if nodes else dtypes.from_python(numbers[0])
    out = []
    for s in srcs:
        if isinstance(s, UOp):
            out.append(s)
        elif isinstance(s, float) and not dtype.is_float:
            raise UOpError(f"{op.name}: float constant {s!r} with a {dtype.name} operand; cast the operand first")
        else:
            out.append(UOp.const(s, dtype))
    return tuple(out)


def const(value: ConstValue, dtype: DType | None = None) -> UOp:
    return UOp.const(value, dtype)


def range_(end: int | UOp, axis: int, kind: AxisType = AxisType.LOOP) -> UOp:
    """A loop index over [0, end); `axis` must be unique within a kernel."""
    end_uop = end if isinstance(end, UOp) else UOp.const(end, dtypes.index)
    return UOp(Ops.RANGE, end_uop.dtype, (end_uop,), RangeArg(axis, kind))


def sink(*srcs: UOp) -> UOp:
    return UOp(Ops.SINK, dtypes.void, srcs)


def param(index: int, dtype: DType = dtypes.int32) -> UOp:
    """The `index`-th parameter of the CALL whose body this appears in."""
    return UOp(Ops.PARAM, dtype, (), index)


def call(name: str, body: UOp, *args: UOp) -> UOp:
    return UOp(Ops.CALL, body.dtype, (body, *args), name)


def where(cond: UOp, a: UOp | ConstValue, b: UOp | ConstValue) -> UOp:
    return cond.where(a, b)


def cast(x: UOp, dtype: DType) -> UOp:
    return x.cast(dtype)


def stack(*elements: UOp | ConstValue) -> UOp:
    """A shaped constant; elements are scalars or equal-shaped STACKs."""
    srcs = [e if isinstance(e, UOp) else UOp.const(e) for e in elements]
    if not srcs:
        raise UOpError("STACK: needs at least one element")
    return UOp(Ops.STACK, srcs[0].dtype, srcs)


def toposort(root: UOp, enter: Callable[[UOp], Iterable[UOp]] | None = None) -> list[UOp]:
    """Every node reachable from `root`, each after its sources; iterative, so depth does not matter.

    `enter(u)` chooses which sources of `u` to follow (all of them by default). The default order is kept on
    `root`: the passes of a plan ask for the order of one kernel many times (to find a range, the loads, the
    stores, the tile's size), and a new list of the kept nodes costs a copy, not a walk.
    """
    if enter is None:
        if root._order is None:
            root._order = tuple(_walk(root, None)[:-1])  # without the root itself: no cycle for the collector
        return [*root._order, root]
    return _walk(root, enter)


def _walk(root: UOp, enter: Callable[[UOp], Iterable[UOp]] | None) -> list[UOp]:
    order: list[UOp] = []
    visited: set[UOp] = set()
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
        u, children_done = stack.pop()
        if children_done:
            order.append(u)
            continue
        if u in visited:
            continue
        visited.add(u)
        stack.append((u, True))
        for s in reversed(tuple(u.src if enter is None else enter(u))):
            if s not in visited:
                stack.append((s, False))
    return order


def substitute(root: UOp, mapping: dict[UOp, UOp], enter_calls: bool = True) -> UOp:
    """`root` with every node in `mapping` replaced; with `enter_calls=False`, CALL bodies are kept as they are."""

    def enter(u: UOp) -> Iterable[UOp]:
        return u.src[1:] if u.op is Ops.CALL else u.src

    new: dict[UOp, UOp] = {}
    for u in toposort(root, None if enter_calls else enter):
        if u in mapping:
            new[u] = mapping[u]
            continue
        src = tuple(new.get(s, s) for s in u.src)
        new[u] = u if src == u.src else u.replace(src=src)
    return new[root]


def call_body_params(body: UOp) -> list[UOp]:
    """The PARAMs that belong to `body`: those not inside the body of a nested CALL."""
    return [u for u in toposort(body, lambda u: u.src[1:] if u.op is Ops.CALL else u.src) if u.op is Ops.PARAM]


# ---------------------------------------------------------------------------------------------------------
# Validation: every constructor checks its node here, and the checks return the node's shape.
# ---------------------------------------------------------------------------------------------------------


def _fail(u: UOp, problem: str) -> UOpError:
    return UOpError(f"{u.op.name}: {problem}")


def _describe(s: UOp) -> str:
    return f"{s.dtype.name}{list(s.shape) if s.shape else ''}"


def _broadcast_shapes(u: UOp, srcs: Sequence[UOp]) -> Shape:
    shapes = {s.shape for s in srcs if s.shape != ()}
    if len(shapes) > 1:
        got = " vs ".join(str(s.shape) for s in srcs)
        raise _fail(u, f"shape mismatch {got}; reshape and expand to one shape (only scalars broadcast)")
    return shapes.pop() if shapes else ()


def _scalar_dtype(u: UOp) -> DType:
    if isinstance(u.dtype, PtrDType):
        raise _fail(u, f"dtype must be a scalar type, not the pointer {u.dtype.name}")
    return u.dtype


def _check_alu(u: UOp) -> Shape:
    dt = _scalar_dtype(u)
    n = _ALU_ARITY[u.op]
    if len(u.src) != n:
        raise _fail(u, f"takes {n} source(s), got {len(u.src)}")
    values = u.src[1:] if u.op is Ops.WHERE else u.src
    in_dt = {s.dtype for s in values}
    if len(in_dt) > 1:
        names = " vs ".join(s.dtype.name for s in values)
        fix = promote(*(s.scalar_dtype for s in values[:2])).name
        raise _fail(u, f"dtype mismatch {names}; insert a CAST (both to {fix}, by the promotion rules)")
    src_dt = values[0].scalar_dtype
    if u.op is Ops.WHERE and u.src[0].dtype is not dtypes.bool:
        raise _fail(u, f"condition must be bool, got {u.src[0].dtype.name}; compare it first")
    want = dtypes.bool if u.op in Ops.COMPARISON else src_dt
    if dt is not want:
        raise _fail(u, f"result dtype must be {want.name} for {src_dt.name} operands, got {dt.name}")
    allowed = _ALU_KINDS.get(u.op)
    if allowed is not None and src_dt.kind not in allowed:
        raise _fail(u, f"not defined for {src_dt.name}; it takes {' or '.join(allowed)} operands")
    return _broadcast_shapes(u, u.src)


_ALU_ARITY: dict[Ops, int] = {**dict.fromkeys(Ops.UNARY, 1), **dict.fromkeys(Ops.BINARY, 2), Ops.WHERE: 3}

_ALU_KINDS: dict[Ops, tuple[str, ...]] = {
    **dict.fromkeys((Ops.EXP, Ops.LOG, Ops.SQRT, Ops.SIN, Ops.COS, Ops.DIV, Ops.POW), ("float",)),
    **dict.fromkeys((Ops.NEG, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD), ("int", "uint", "float")),
    **dict.fromkeys((Ops.AND, Ops.OR, Ops.XOR), ("bool", "int", "uint")),
}


def operand_kinds(op: Ops) -> tuple[str, ...] | None:
    """The kinds of dtype ("bool", "int", "uint", "float") ALU op `op` is defined for; None for every kind."""
    return _ALU_KINDS.get(op)


def _check_const(u: UOp) -> Shape:
    dt, v = _scalar_dtype(u), u.arg
    if u.src:
        raise _fail(u, "takes no sources")
    ok = (
        (dt.is_bool and isinstance(v, bool))
        or (dt.is_int and isinstance(v, int) and not isinstance(v, bool) and dt.min <= v <= dt.max)
        or (dt.is_float and isinstance(v, float))
    )
    if not ok:
        want = {"bool": "True or False", "float": "a Python float"}.get(dt.kind, f"an int in [{dt.min}, {dt.max}]")
        raise _fail(u, f"value {v!r} ({type(v).__name__}) does not fit {dt.name}; it takes {want}")
    if dt.is_float and not (math.isnan(v) or v == round_to(dt, v)):
        raise _fail(u, f"value {v!r} is not exactly a {dt.name}; use UOp.const, which rounds it")
    return ()


def _check_cast(u: UOp) -> Shape:
    _scalar_dtype(u)
    if len(u.src) != 1:
        raise _fail(u, f"takes 1 source, got {len(u.src)}")
    _scalar_dtype(u.src[0])
    return u.src[0].shape


def _check_movement(u: UOp) -> Shape:
    if len(u.src) != 1:
        raise _fail(u, f"takes 1 source, got {len(u.src)}")
    x = u.src[0]
    if u.dtype is not x.dtype:
        raise _fail(u, f"dtype {u.dtype.name} differs from its source's {x.dtype.name}")
    return _MOVEMENT_SHAPE[u.op](u, x.shape, u.arg)


def _is_int(v: Any) -> bool:
    """A Python int that is not a bool: sizes, axes and slots."""
    return isinstance(v, int) and not isinstance(v, bool)


def _int_tuple(u: UOp, arg: Any, what: str, depth: int = 1) -> None:
    ok = isinstance(arg, tuple) and all(
        (isinstance(a, int) and not isinstance(a, bool)) if depth == 1 else isinstance(a, tuple) and len(a) == 2
        for a in arg
    )
    if depth == 2 and ok:
        ok = all(isinstance(b, int) and not isinstance(b, bool) for a in arg for b in a)
    if not ok:
        raise _fail(u, f"arg must be {what}, got {arg!r}")


def _reshape_shape(u: UOp, shape: Shape, arg: Any) -> Shape:
    _int_tuple(u, arg, "a tuple of ints (the new shape)")
    if any(s < 0 for s in arg):
        raise _fail(u, f"shape {arg} has a negative dimension")
    if prod(arg) != prod(shape):
        raise _fail(u, f"cannot reshape {shape} ({prod(shape)} elements) to {arg} ({prod(arg)} elements)")
    return tuple(arg)


def _permute_shape(u: UOp, shape: Shape, arg: Any) -> Shape:
    _int_tuple(u, arg, "a tuple of ints (a permutation)")
    if sorted(arg) != list(range(len(shape))):
        raise _fail(u, f"{arg} is not a permutation of the {len(shape)} axes of {shape}")
    return tuple(shape[i] for i in arg)


def _expand_shape(u: UOp, shape: Shape, arg: Any) -> Shape:
    _int_tuple(u, arg, "a tuple of ints (the new shape)")
    if len(arg) != len(shape) or any(s not in (n, 1) or n < 0 for s, n in zip(shape, arg, strict=True)):
        rank = len(shape)
        raise _fail(u, f"cannot expand {shape} to {arg}: only axes of size 1 grow (or go to 0); the rank stays {rank}")
    return tuple(arg)


def _shrink_shape(u: UOp, shape: Shape, arg: Any) -> Shape:
    _int_tuple(u, arg, "a tuple of (begin, end) pairs", depth=2)
    if len(arg) != len(shape) or any(not 0 <= b <= e <= s for (b, e), s in zip(arg, shape, strict=True)):
        raise _fail(u, f"bounds {arg} do not fit {shape}: each axis needs 0 <= begin <= end <= size")
    return tuple(e - b for b, e in arg)


def _pad_shape(u: UOp, shape: Shape, arg: Any) -> Shape:
    _int_tuple(u, arg, "a tuple of (before, after) pairs", depth=2)
    if len(arg) != len(shape) or any(b < 0 or a < 0 for b, a in arg):
        raise _fail(u, f"widths {arg} do not fit {shape}: one (before, after) pair per axis, none negative")
    return tuple(s + b + a for (b, a), s in zip(arg, shape, strict=True))


def _flip_shape(u: UOp, shape: Shape, arg: Any) -> Shape:
    _int_tuple(u, arg, "a tuple of axes")
    if len(set(arg)) != len(arg) or any(not 0 <= a < len(shape) for a in arg):
        raise _fail(u, f"axes {arg} must be distinct axes of {shape}")
    return shape


_MOVEMENT_SHAPE: dict[Ops, Callable[[UOp, Shape, Any], Shape]] = {
    Ops.RESHAPE: _reshape_shape,
    Ops.PERMUTE: _permute_shape,
    Ops.EXPAND: _expand_shape,
    Ops.SHRINK: _shrink_shape,
    Ops.PAD: _pad_shape,
    Ops.FLIP: _flip_shape,
}


def _check_identity(u: UOp) -> Shape:
    if len(u.src) != 1 or u.dtype is not u.src[0].dtype or u.arg is not None:
        raise _fail(u, "takes 1 source of its own dtype and no arg")
    return u.src[0].shape


def _check_reduce_axis(u: UOp) -> Shape:
    if len(u.src) != 1 or u.dtype is not u.src[0].dtype:
        raise _fail(u, "takes 1 source of its own dtype")
    shape = u.src[0].shape
    if not (isinstance(u.arg, tuple) and len(u.arg) == 2 and u.arg[0] in Ops.REDUCE_OPS):
        ops = ", ".join(sorted(o.name for o in Ops.REDUCE_OPS))
        raise _fail(u, f"arg must be (op, axes) with op one of {ops}, got {u.arg!r}")
    op, axes = u.arg
    _int_tuple(u, axes, "(op, axes) with a tuple of axes")
    if len(set(axes)) != len(axes) or any(not 0 <= a < len(shape) for a in axes):
        raise _fail(u, f"axes {axes} must be distinct axes of {shape}")
    if u.dtype is dtypes.bool and op in (Ops.ADD, Ops.MUL):
        raise _fail(u, f"cannot reduce bool with {op.name}; cast to an integer type first")
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _check_stack(u: UOp) -> Shape:
    if not u.src:
        raise _fail(u, "needs at least one element")
    if any(s.dtype is not u.dtype or s.shape != u.src[0].shape for s in u.src):
        got = ", ".join(_describe(s) for s in u.src)
        raise _fail(u, f"elements must share the dtype {u.dtype.name} and one shape, got {got}")
    return (len(u.src), *u.src[0].shape)


def _check_buffer(u: UOp) -> Shape:
    a = u.arg
    if not (isinstance(a, BufferArg) and _is_int(a.slot) and _is_int(a.size) and a.slot >= 0 and a.size >= 0):
        raise _fail(u, f"arg must be BufferArg(slot >= 0, size >= 0), got {u.arg!r}")
    if u.op is Ops.BUFFER:
        _scalar_dtype(u)
        return (u.arg.size,)
    if not isinstance(u.dtype, PtrDType):
        raise _fail(u, f"dtype must be a pointer, got {u.dtype.name}")
    return ()


def _check_param(u: UOp) -> Shape:
    _scalar_dtype(u)
    if not (_is_int(u.arg) and u.arg >= 0) or u.src:
        raise _fail(u, f"takes no sources and an index >= 0, got {u.arg!r}")
    return ()


def _check_call(u: UOp) -> Shape:
    if not u.src or not isinstance(u.arg, str):
        raise _fail(u, "needs src = (body, *arguments) and a name")
    if not u.arg or not u.arg.isascii() or not u.arg.isprintable() or any(c in u.arg for c in '"#'):
        raise _fail(u, f"name {u.arg!r} must be printable ASCII without '\"' or '#' (the .uir text quotes it)")
    body, args = u.src[0], u.src[1:]
    if u.dtype is not body.dtype:
        raise _fail(u, f"dtype {u.dtype.name} differs from its body's {body.dtype.name}")
    for p in call_body_params(body):
        if p.arg >= len(args):
            raise _fail(u, f"{u.arg}: body uses parameter {p.arg} but the call passes {len(args)} argument(s)")
        if args[p.arg].dtype is not p.dtype:
            raise _fail(u, f"{u.arg}: parameter {p.arg} is {p.dtype.name}, argument is {args[p.arg].dtype.name}")
    return body.shape


def _check_range(u: UOp) -> Shape:
    ok_arg = isinstance(u.arg, RangeArg) and _is_int(u.arg.axis) and isinstance(u.arg.kind, AxisType)
    if len(u.src) != 1 or not ok_arg:
        raise _fail(u, f"needs src = (end,) and arg RangeArg(axis, kind), got {u.arg!r}")
    end_dtype = u.src[0].dtype
    if not (isinstance(end_dtype, DType) and end_dtype.is_int and u.dtype is end_dtype):
        raise _fail(u, f"end and index must share an integer dtype, got {u.src[0].dtype.name} and {u.dtype.name}")
    return ()


def _check_load(u: UOp) -> Shape:
    if len(u.src) not in (2, 3) or not isinstance(u.src[0].dtype, PtrDType):
        raise _fail(u, "needs src = (pointer, index) or (pointer, index, gate)")
    if not u.src[1].scalar_dtype.is_int or u.src[1].shape:
        raise _fail(u, f"index must be an integer scalar, got {_describe(u.src[1])}")
    if len(u.src) == 3 and u.src[2].dtype is not dtypes.bool:
        raise _fail(u, f"gate must be bool, got {u.src[2].dtype.name}")
    if u.dtype is not u.src[0].dtype.base:
        raise _fail(u, f"loads {u.src[0].dtype.base.name}, not {u.dtype.name}")
    if u.arg is not None and (type(u.arg) is not int or u.arg < 1):
        raise _fail(u, f"prefetch (the arg) must be a positive number of elements ahead or None, got {u.arg!r}")
    return ()


def _check_store(u: UOp) -> Shape:
    if len(u.src) not in (3, 4) or not isinstance(u.src[0].dtype, PtrDType) or u.dtype is not dtypes.void:
        raise _fail(u, "needs src = (pointer, index, value) or (pointer, index, value, gate) and dtype void")
    if len(u.src) == 4 and u.src[3].dtype is not dtypes.bool:
        raise _fail(u, f"gate must be bool, got {u.src[3].dtype.name}")
    if not u.src[1].scalar_dtype.is_int:
        raise _fail(u, f"index must be an integer, got {u.src[1].dtype.name}")
    if u.src[2].dtype is not u.src[0].dtype.base:
        raise _fail(u, f"stores {u.src[2].dtype.name} into a {u.src[0].dtype.base.name} buffer; insert a CAST")
    return ()


def _check_ranges(u: UOp, ranges: Sequence[UOp], at_least: int) -> None:
    if len(ranges) < at_least or any(r.op is not Ops.RANGE for r in ranges):
        raise _fail(u, f"expects {at_least} or more RANGE sources after the first, got {[r.op.name for r in ranges]}")


def _check_reduce(u: UOp) -> Shape:
    if not u.src or u.arg not in Ops.REDUCE_OPS or u.dtype is not u.src[0].dtype:
        raise _fail(u, "needs src = (value, *ranges) of the value's dtype, and a reduce op as arg")
    _check_ranges(u, u.src[1:], 1)
    return ()


def _check_define_acc(u: UOp) -> Shape:
    if not u.src or u.src[0].op is not Ops.CONST or u.dtype is not u.src[0].dtype or not isinstance(u.arg, int):
        raise _fail(u, "needs src = (initial constant, *ranges) of its dtype and a number as arg")
    _check_ranges(u, u.src[1:], 0)
    return ()


def _check_accumulate(u: UOp) -> Shape:
    if len(u.src) < 2 or u.src[0].op is not Ops.DEFINE_ACC or (u.arg is not None and u.arg not in Ops.REDUCE_OPS):
        raise _fail(u, "needs src = (DEFINE_ACC, value, *ranges) and a reduce op (or None, to assign) as arg")
    if not u.dtype is u.src[0].dtype is u.src[1].dtype:
        raise _fail(u, f"accumulator, value and result dtypes differ: {u.src[0].dtype.name}, {u.src[1].dtype.name}")
    _check_ranges(u, u.src[2:], 1)
    return ()


def _check_end(u: UOp) -> Shape:
    if not u.src or u.src[0].op not in (Ops.STORE, Ops.ACCUMULATE, Ops.END):
        raise _fail(u, "closes loops after a STORE, an ACCUMULATE or another END")
    want = u.src[0].dtype if u.src[0].op is not Ops.STORE else dtypes.void
    if u.dtype is not want:
        raise _fail(u, f"dtype must be {want.name}, the dtype of what it closes")
    _check_ranges(u, u.src[1:], 1)
    return ()


def _is_shared(u: UOp) -> bool:
    return isinstance(u.dtype, PtrDType) and u.dtype.addrspace is AddrSpace.SHARED


def _check_barrier(u: UOp) -> Shape:
    buf = u.src[0] if u.src else None
    if buf is None or buf.op is not Ops.DEFINE_GLOBAL or not _is_shared(buf):
        raise _fail(u, "needs src = (shared buffer, *stores): a DEFINE_GLOBAL in shared memory first")
    if u.dtype is not buf.dtype or any(s.op is not Ops.STORE or not _is_shared(s.src[0]) for s in u.src[1:]):
        raise _fail(u, f"takes the dtype of its buffer ({buf.dtype.name}) and stores into shared memory after it")
    return ()


def _check_shuffle(u: UOp) -> Shape:
    dt = _scalar_dtype(u)
    if len(u.src) != 2 or u.src[0].dtype is not dt or u.src[1].dtype is not dtypes.int32:
        raise _fail(u, f"needs src = (value of its dtype {dt.name}, int32 lane), got {[_describe(s) for s in u.src]}")
    return ()


def _check_mma(u: UOp) -> Shape:
    half = (dtypes.float16, dtypes.bfloat16)
    if len(u.src) != 12 or u.src[0].dtype not in half or any(s.dtype is not u.src[0].dtype for s in u.src):
        got = [_describe(s) for s in u.src]
        raise _fail(u, f"needs 12 sources of one 16-bit float dtype (8 of A, 4 of B), got {got}")
    if u.dtype is not dtypes.float32 or u.arg not in range(4):
        raise _fail(u, f"is float32 with arg 0..3 (which element of the D fragment), got {u.dtype.name} and {u.arg!r}")
    return ()


def _check_void(u: UOp) -> Shape:
    if u.dtype is not dtypes.void:
        raise _fail(u, f"dtype must be void, got {u.dtype.name}")
    if u.op is Ops.ENDRANGE and (len(u.src) != 1 or u.src[0].op is not Ops.RANGE):
        raise _fail(u, "needs src = (range,)")
    return ()


_CHECKS: dict[Ops, Callable[[UOp], Shape]] = {
    **dict.fromkeys(Ops.ALU, _check_alu),
    **dict.fromkeys(Ops.MOVEMENT, _check_movement),
    Ops.CONST: _check_const,
    Ops.CAST: _check_cast,
    Ops.REDUCE_AXIS: _check_reduce_axis,
    Ops.CONTIGUOUS: _check_identity,
    Ops.DETACH: _check_identity,
    Ops.STACK: _check_stack,
    Ops.BUFFER: _check_buffer,
    Ops.DEFINE_GLOBAL: _check_buffer,
    Ops.PARAM: _check_param,
    Ops.CALL: _check_call,
    Ops.RANGE: _check_range,
    Ops.LOAD: _check_load,
    Ops.STORE: _check_store,
    Ops.REDUCE: _check_reduce,
    Ops.DEFINE_ACC: _check_define_acc,
    Ops.ACCUMULATE: _check_accumulate,
    Ops.END: _check_end,
    Ops.SINK: _check_void,
    Ops.ENDRANGE: _check_void,
    Ops.BARRIER: _check_barrier,
    Ops.SHUFFLE: _check_shuffle,
    Ops.MMA: _check_mma,
}


def check_node(u: UOp) -> Shape:
    """Validate a new node and return its shape; raises UOpError naming what is wrong and what would be valid."""
    if not isinstance(u.op, Ops):
        raise UOpError(f"op must be an Ops member, got {u.op!r}")
    if not isinstance(u.dtype, (DType, PtrDType)):
        raise _fail(u, f"dtype must be a DType, got {u.dtype!r}")
    if any(not isinstance(s, UOp) for s in u.src):
        raise _fail(u, f"sources must be UOps, got {[type(s).__name__ for s in u.src]}")
    if u.arg is not None and u.op not in _TAKES_ARG:
        raise _fail(u, f"takes no arg, got {u.arg!r}")
    return _CHECKS[u.op](u)


_TAKES_ARG = Ops.MOVEMENT | {
    Ops.CONST,
    Ops.PARAM,
    Ops.CALL,
    Ops.RANGE,
    Ops.BUFFER,
    Ops.DEFINE_GLOBAL,
    Ops.REDUCE_AXIS,
    Ops.REDUCE,
    Ops.DEFINE_ACC,
    Ops.ACCUMULATE,
    Ops.MMA,
    Ops.LOAD,
}
