"""Tensor: a lazy, numpy-style array whose operations build a UOp graph, compiled when a value is needed.

Every operation returns at once with a new Tensor whose `uop` is a bigger graph. Nothing is computed until
`numpy()`, `item()` or `realize()` asks for a value: then the graph is cut into kernels, compiled (once per
graph structure) and run, and the tensor's `uop` becomes a BUFFER holding the result.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import math
import operator
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeGuard, cast

import numpy as np

from uopc.ir import DType, OpMixin, Ops, UOp, dtypes, operand_kinds, prod, promote, round_to, toposort
from uopc.lower import get_backend
from uopc.tensor.attention import kernel_attention
from uopc.tensor.autodiff import compute_gradients
from uopc.tensor.errors import TensorError, TensorIndexError
from uopc.tensor.realize import buffer_node, realize, realizer

Scalar: TypeAlias = bool | int | float
Operand: TypeAlias = "Tensor | Scalar | np.generic[Any]"
AxisArg: TypeAlias = int | Sequence[int] | None
DTypeLike: TypeAlias = "DType | str | type[Any] | np.dtype[Any]"


def _default_device() -> str:
    """The backend new tensors compute on: $DEVICE (C unless set), by its registered name."""
    return os.environ.get("DEVICE", "C").upper()


def broadcast_shape(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcasting: align shapes on the right; each axis must match or be 1."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded, strict=True):
        big = {n for n in sizes if n != 1}
        if len(big) > 1:
            raise TensorError(f"{op}: shapes {' and '.join(str(s) for s in shapes)} do not broadcast")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _axes(axis: AxisArg, shape: tuple[int, ...], op: str) -> tuple[int, ...]:
    """Axes of a tensor of `shape` as non-negative ints; None means all of them."""
    ndim = len(shape)
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for item in items:
        if not _is_index(item):  # a bool is an int to Python, but sum(True) meaning sum(1) is a typo, not a request
            raise TensorError(f"{op}: axis {item!r} is not an integer")
        a = operator.index(item)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise TensorError(f"{op}: axis {a} is out of range for a tensor of shape {shape} ({ndim} dimensions)")
        if ndim:  # a 0-d tensor accepts axis 0 or -1, as in PyTorch, and has no axis to act on
            out.append(a % ndim)
    if len(set(out)) != len(out):
        raise TensorError(f"{op}: axes {items} repeat an axis of a tensor of shape {shape} ({ndim} dimensions)")
    return tuple(out)


def _is_index(v: object) -> TypeGuard[int | np.integer[Any]]:
    """A Python or numpy integer, and not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def to_dtype(spec: DTypeLike, op: str = "dtype") -> DType:
    """The DType that `spec` names: a DType, one of its names ("float32", "f32", "bfloat16"), or a numpy dtype
    or scalar type (np.float32, np.dtype("int8"); Python's float is float64, as in numpy and PyTorch).
    Every function that takes a dtype reads it here, so all accept the same spellings."""
    if isinstance(spec, DType) and spec is not dtypes.void:
        return spec
    try:
        if isinstance(spec, str) and spec != "void":  # uopc's names only: numpy's "i8" would be int64
            return dtypes.by_name(spec)
        if isinstance(spec, (np.dtype, type)):
            return dtypes.from_numpy(str(np.dtype(spec)))
    except (TypeError, ValueError):
        pass
    names = ", ".join(d.name for d in dtypes.all())
    raise TensorError(
        f"{op}: {spec!r} is not a dtype; give a uopc dtype (dtypes.float32), a numpy dtype or scalar type "
        f"(np.float32), or a name: {names}"
    )


def _is_operand(v: object) -> TypeGuard[Operand]:
    """What an arithmetic operator or comparison takes next to a tensor: a tensor or a bool, int or float
    (Python's or numpy's)."""
    return isinstance(v, (Tensor, bool, int, float)) or (isinstance(v, np.generic) and v.dtype.kind in "biuf")


def _operator(method: Callable[[Tensor, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    """An operator method (+, <, ==, ...). Another type of operand gives NotImplemented, so Python asks the
    other operand and then raises TypeError (== falls back to identity); a numpy scalar is taken as the Python
    number it holds (np.float32(2) * t is 2.0 * t, as in PyTorch)."""

    @functools.wraps(method)
    def checked(self: Tensor, x: Any) -> Tensor:
        if not _is_operand(x):
            return cast(Tensor, NotImplemented)  # Python's signal to try the other operand's method
        return method(self, x.item() if isinstance(x, np.generic) else x)

    return checked


class _CastMethods:
    """The casts PyTorch users type as methods: t.int(), t.long(), t.half(), t.double(), t.bool().

    A base class of Tensor, not part of its body: a method named `int` or `bool` in the class body would be
    what the annotations there (`keepdim: bool`) name."""

    __slots__ = ()

    if TYPE_CHECKING:

        def cast(self, dtype: DTypeLike) -> Tensor: ...

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)


class Tensor(_CastMethods, OpMixin["Scalar | np.generic[Any]"]):
    """A lazy n-dimensional array. Build one from a numpy array, a nested list or a Python scalar."""

    __slots__ = ("__weakref__", "device", "grad", "requires_grad", "uop")

    _rng: ClassVar[np.random.Generator] = np.random.default_rng()
    _grad_enabled: ClassVar[bool] = True

    def __init__(
        self,
        data: Any,
        dtype: DTypeLike | None = None,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> None:
        self.device = device.upper() if device else _default_device()
        self.grad: Tensor | None = None
        dt = None if dtype is None else to_dtype(dtype, "Tensor")
        self.uop: UOp = data if isinstance(data, UOp) else _buffer_from(data, dt, self.device)
        if isinstance(data, UOp) and dt is not None and data.dtype is not dt:
            self.uop = data.cast(dt)
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_()

    # ---- basics ----
    @property
    def shape(self) -> tuple[int, ...]:
        return self.uop.shape

    @property
    def dtype(self) -> DType:
        return self.uop.scalar_dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return prod(self.shape)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"<Tensor shape={self.shape} dtype={self.dtype.name} device={self.device}{grad}>"

    __hash__ = object.__hash__  # by identity: == compares elements, so equal tensors need not hash alike

    # ---- Python protocols ----
    def __bool__(self) -> bool:
        """The truth of a one-element tensor, computed; for more elements it is ambiguous, as in numpy."""
        if self.numel() != 1:
            raise TensorError(
                f"bool() of a tensor of shape {self.shape} is ambiguous; reduce it to one element first, "
                "such as (t != 0).max() for 'any element' and (t != 0).min() for 'all elements'"
            )
        return bool(self.item())

    def __float__(self) -> builtins.float:
        return builtins.float(self._only_value("float()"))

    def __int__(self) -> int:
        return int(self._only_value("int()"))

    def __index__(self) -> int:
        """A one-element integer tensor as an index or a size: xs[t], range(t). A float is no index."""
        if not self.dtype.is_int or self.numel() != 1:
            raise TypeError(
                f"only a one-element integer tensor is an index; this one is {self.dtype.name} of shape {self.shape}"
            )
        return int(self._only_value("index"))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        """The tensor's rows, t[0], t[1], ...: for loops, list(t) and `a, b = t` see a sequence of them."""
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, value: object) -> bool:
        """`v in t`: whether any element equals v (v broadcast against t), as in numpy and PyTorch."""
        if not _is_operand(value):
            raise TypeError(f"'in <Tensor>' needs a number or a tensor on the left, not {type(value).__name__}")
        return bool(self._binary(Ops.CMPEQ, value, "in").numpy().any())

    __array_ufunc__ = None
    """numpy defers to Tensor: np.float32(2) * t calls t.__rmul__, and np.exp(t) is refused, instead of
    turning t into an array and computing eagerly, without gradients."""

    def __array__(self, dtype: Any = None, copy: builtins.bool | None = None) -> np.ndarray[Any, Any]:
        """numpy's conversion protocol (np.asarray(t)): a new array of the values."""
        if copy is False:  # numpy 2: the caller wants a view of the memory, and a backend buffer is not one
            raise ValueError("np.asarray(t, copy=False): a tensor's values are in a backend buffer, and only copied")
        values = self.numpy()
        return values if dtype is None else values.astype(dtype, copy=False)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and copy (copy.copy, copy.deepcopy) by value: the copy has a buffer of its own, and is a
        leaf of its own when it requires a gradient. Sharing the graph would send the copy's gradients to
        the original, and a pickled graph has no data once read in another process."""
        return (Tensor, (self.numpy(), self.dtype.name, self.device, self.requires_grad))

    def requires_grad_(self, value: bool = True) -> Tensor:
        """Mark this tensor as a leaf whose gradient `backward()` computes (it is realized first)."""
        if value and not self.dtype.is_float:
            raise TensorError(f"requires_grad needs a float tensor, this one is {self.dtype.name}")
        if value:
            self.realize()
        self.requires_grad = value
        if value:
            realizer.leaves[id(self)] = self
        return self

    def _derive(self, uop: UOp, *sources: Tensor) -> Tensor:
        """A new tensor computed from `sources`; tracks gradients unless they are switched off."""
        tracked = uop.scalar_dtype.is_float and any(s.requires_grad for s in sources)  # no gradient for ints, bools
        if tracked and not Tensor._grad_enabled:
            uop = UOp(Ops.DETACH, uop.dtype, (uop,))
        out = Tensor(uop, device=self.device)
        out.requires_grad = tracked and Tensor._grad_enabled
        return out

    # ---- realizing ----
    def realize(self, *others: Tensor) -> Tensor:
        """Compute this tensor (and `others`, in the same plan) now; returns self."""
        todo = [t for t in (self, *others) if not is_realized(t.uop) and t.uop not in realizer.computed]
        for device in {t.device for t in todo}:
            group = [t for t in todo if t.device == device]
            full = [t for t in group if t.numel()]
            bufs = dict(zip(map(id, full), realize([t.uop for t in full], device), strict=True)) if full else {}
            for t in group:
                buf = bufs[id(t)] if t.numel() else _empty_buffer(t.dtype, device)  # empty: nothing to compute
                value = buf if t.shape == buf.shape else buf.reshape(t.shape)
                if t.requires_grad:  # keep the graph, so that backward() still reaches the leaves through it
                    realizer.computed[t.uop] = value
                else:
                    t.uop = value
        return self

    def numpy(self) -> np.ndarray[Any, Any]:
        """The value as a numpy array (a copy). numpy has no bfloat16: bfloat16 comes out as float32 (exact)."""
        if realizer.recording is not None:  # a replay runs kernels only: no Python would see the new values
            raise TensorError(
                f"capture: {realizer.recording.name} reads a tensor's values ({self.dtype.name} of shape "
                f"{self.shape}) while it is captured; a replay would not read them again: return the tensor "
                "from the step and read it after the call"
            )
        return self._host_values()

    def _host_values(self) -> np.ndarray[Any, Any]:
        if self.dtype is dtypes.bfloat16:
            return self.cast(dtypes.float32)._host_values()
        self.realize()
        runtime = get_backend(self.device).runtime
        value = realizer.computed.get(self.uop, self.uop)
        base = value if value.op is Ops.BUFFER else value.src[0]
        return np.array(runtime.to_numpy(realizer.buffers[base]), copy=True).reshape(self.shape)

    def item(self) -> Scalar:
        return self._only_value("item()")

    def _only_value(self, op: str) -> Scalar:
        if self.numel() != 1:
            raise TensorError(f"{op} needs a tensor with one element, this one has shape {self.shape}")
        value: Scalar = self.numpy().reshape(()).item()
        return value

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def contiguous(self) -> Tensor:
        """The same values, computed once into a buffer of their own; whatever uses them reads that buffer.

        The kernel that computes them may also compute other outputs of the same shape."""
        return self._derive(UOp(Ops.CONTIGUOUS, self.uop.dtype, (self.uop,)), self)

    def detach(self) -> Tensor:
        """The same values, with no gradient flowing back through them."""
        return Tensor(UOp(Ops.DETACH, self.uop.dtype, (self.uop,)), device=self.device)

    def cast(self, dtype: DTypeLike) -> Tensor:
        """The values converted to `dtype`. They are not computed yet, so not checked: a narrower integer type
        wraps them, as numpy's astype does."""
        dt = to_dtype(dtype, "cast")
        return self if dt is self.dtype else self._derive(self.uop.cast(dt), self)

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    # ---- gradients ----
    @staticmethod
    @contextlib.contextmanager
    def no_grad() -> Iterator[None]:
        """Inside `with Tensor.no_grad():`, results carry no gradient (as in evaluation or optimizer steps)."""
        before, Tensor._grad_enabled = Tensor._grad_enabled, False
        try:
            yield
        finally:
            Tensor._grad_enabled = before

    def backward(self) -> None:
        """Add d self / d leaf to `.grad` of every leaf with requires_grad that self depends on."""
        if self.numel() != 1:
            raise TensorError(f"backward() needs a scalar loss, this tensor has shape {self.shape}; reduce it first")
        if not self.dtype.is_float:
            raise TensorError(f"backward() needs a float loss, this one is {self.dtype.name}")
        if not self.requires_grad:  # there would be no gradient anywhere, and nothing would say so
            raise TensorError("backward(): the loss depends on no tensor that requires grad, or was made in no_grad")
        custom = realizer.custom_gradients  # the outputs of kernels written in UOps lead back by these
        in_graph = set(toposort(self.uop, lambda u: custom[u].sources if u in custom else u.src))
        leaves = [t for t in realizer.leaves.values() if t.requires_grad and t.uop in in_graph]
        grads = compute_gradients(self.uop, [t.uop for t in leaves], realizer.custom_gradients)
        for t in leaves:
            if t.uop in grads:
                g = Tensor(grads[t.uop], device=t.device)
                t.grad = g if t.grad is None else t.grad + g

    # ---- creation ----
    @staticmethod
    def manual_seed(seed: int) -> None:
        """Make rand, randn and uniform (and layers initialized with them) repeat from run to run."""
        Tensor._rng = np.random.default_rng(seed)

    @staticmethod
    def full(
        shape: int | Sequence[int], value: Scalar | np.generic[Any], dtype: DTypeLike | None = None, **kw: Any
    ) -> Tensor:
        """`value` everywhere: one constant, expanded. A value the dtype cannot hold is refused, not wrapped."""
        v = _python_scalar(value, "full")
        dt = dtypes.from_python(v) if dtype is None else to_dtype(dtype, "full")
        c = UOp.const(_constant(v, dt, "full"), dt)
        size = _sizes("full", (shape,))
        if size:
            c = c.reshape((1,) * len(size)).expand(size)
        return Tensor(c, **kw)

    @staticmethod
    def zeros(*shape: int | Sequence[int], dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        return Tensor.full(_sizes("zeros", shape), 0, dtypes.float32 if dtype is None else dtype, **kw)

    @staticmethod
    def ones(*shape: int | Sequence[int], dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        return Tensor.full(_sizes("ones", shape), 1, dtypes.float32 if dtype is None else dtype, **kw)

    @staticmethod
    def arange(
        start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DTypeLike | None = None, **kw: Any
    ) -> Tensor:
        """start, start + step, ... before stop: computed in float64 or int64, then rounded to the dtype."""
        if stop is None:
            start, stop = 0, start
        bounds = [_python_scalar(v, "arange") for v in (start, stop, step)]
        if bounds[2] == 0:
            raise TensorError("arange: step must not be zero")
        values = np.arange(*bounds)
        if dtype is not None:
            return Tensor(values, dtype=dtype, **kw)
        return Tensor(values, dtype=dtypes.float32 if values.dtype.kind == "f" else _int_dtype(values), **kw)

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        rows, cols = _sizes("eye", (n, n if m is None else m))
        return Tensor(np.eye(rows, cols), dtype=dtypes.float32 if dtype is None else dtype, **kw)

    @staticmethod
    def rand(*shape: int | Sequence[int], dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        """Uniform in [0, 1): drawn on the dtype's own grid, since rounding a float64 draw could give 1."""
        dt = _float_dtype(dtype, "rand")
        grid = 2.0 ** _PRECISION[dt]
        return Tensor(np.floor(Tensor._rng.random(_sizes("rand", shape)) * grid) / grid, dtype=dt, **kw)

    @staticmethod
    def randn(*shape: int | Sequence[int], dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        """Standard normal."""
        data = Tensor._rng.standard_normal(_sizes("randn", shape))
        return Tensor(data, dtype=_float_dtype(dtype, "randn"), **kw)

    @staticmethod
    def uniform(
        *shape: int | Sequence[int],
        low: builtins.float = 0.0,
        high: builtins.float = 1.0,
        dtype: DTypeLike | None = None,
        **kw: Any,
    ) -> Tensor:
        data = Tensor._rng.uniform(low, high, _sizes("uniform", shape))
        return Tensor(data, dtype=_float_dtype(dtype, "uniform"), **kw)

    # ---- elementwise ----
    def _operands(self, other: Operand, op: str, reverse: bool = False) -> tuple[UOp, UOp, list[Tensor]]:
        """Both operands as UOps of one dtype and shape: promoted, and broadcast as numpy does."""
        if isinstance(other, Tensor):
            if other.device != self.device:
                raise TensorError(f"{op}: tensors on different devices ({self.device} and {other.device})")
            dt = promote(self.dtype, other.dtype)
            shape = broadcast_shape(op, self.shape, other.shape)
            a, b = self.cast(dt)._broadcast_to(shape).uop, other.cast(dt)._broadcast_to(shape).uop
            sources = [self, other]
        else:
            value = _python_scalar(other, op)
            dt = self.dtype
            if isinstance(value, float) and not dt.is_float:
                dt = dtypes.float32  # a Python float makes an integer tensor float, as in PyTorch
            elif isinstance(value, int) and not isinstance(value, bool) and dt.is_bool:
                dt = dtypes.int32
            if dt.is_int and not dt.min <= value <= dt.max:
                raise TensorError(
                    f"{op}: the constant {value} does not fit the tensor's {dt.name}; cast the tensor first"
                )
            a, b = self.cast(dt).uop, UOp.const(_constant(value, dt, op), dt)  # refuses 1e6 for float16
            sources = [self]
        return (b, a, sources) if reverse else (a, b, sources)

    def _binary(self, op: Ops, other: Operand, name: str, reverse: bool = False) -> Tensor:
        a, b, sources = self._operands(other, name, reverse)
        dt = a.scalar_dtype
        if dt.is_bool:
            op = _BOOL_ARITHMETIC.get(op, op)
        kinds = operand_kinds(op)
        if kinds is not None and dt.kind not in kinds:
            raise TensorError(f"{name}: {op.name} is not defined for {dt.name}; it takes {' or '.join(kinds)} operands")
        return self._derive(a.alu(op, b), *sources)

    def _alu(self, op: Ops, *operands: Operand, reverse: bool = False) -> Tensor:
        """The one hook of the operator layer (uopc.ir's OpMixin gives +, -, <, maximum, exp, ... through it).

        A numpy scalar counts as the Python number it holds (np.float32(2) * t is 2.0 * t, as in PyTorch), true
        division of integers gives floats, a power of integers stays integer, and floor division carries no
        gradient (piecewise constant, as floor; PyTorch defines none)."""
        if not operands:
            return self._unary(op)
        (x,) = operands
        x = x.item() if isinstance(x, np.generic) else x
        if op is Ops.POW:
            return self._power(x, reverse)
        base = self._float_pair(x) if op is Ops.DIV else self
        out = base._binary(op, x, "gt" if op is Ops.CMPLT and reverse else _OP_NAMES[op], reverse)
        return out.detach() if op is Ops.IDIV and out.dtype.is_float else out

    def _is_operand(self, x: object) -> bool:
        return _is_operand(x)

    def _unary(self, op: Ops) -> Tensor:
        """-x keeps the dtype (of a bool it is logical not, as in PyTorch); the math functions compute in float."""
        if op is Ops.NEG:
            return self.logical_not() if self.dtype.is_bool else self._derive(-self.uop, self)
        x = self if self.dtype.is_float else self.float()
        return self._derive(x.uop.alu(op), x)

    def _float_pair(self, x: Operand) -> Tensor:
        """True division of integers gives floats."""
        if self.dtype.is_float or (isinstance(x, Tensor) and x.dtype.is_float) or isinstance(x, float):
            return self
        return self.float()

    @_operator
    def __pow__(self, x: Operand) -> Tensor:
        """A whole exponent >= 0 multiplies (by squaring), so an integer tensor stays an integer tensor; a
        negative one is refused for integers; any other exponent goes to `_power`."""
        if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
            return self._power_by_squaring(x)
        if isinstance(x, int) and not isinstance(x, bool) and not self.dtype.is_float:
            raise TensorError(f"pow: an integer tensor ({self.dtype.name}) to the negative power {x}; cast to float")
        return self._power(x)

    def _power(self, x: Operand, reverse: bool = False) -> Tensor:
        """self ** x (x ** self with `reverse`): integers stay integers (`_integer_power`), anything else is POW
        on floats."""
        base, exponent, sources = self._operands(x, "pow", reverse)
        if base.scalar_dtype.is_int:
            return self._derive(_integer_power(base, exponent), *sources)
        return self._float_pair(x)._binary(Ops.POW, x, "pow", reverse)

    def _power_by_squaring(self, k: int) -> Tensor:
        base = self.cast(dtypes.int32) if self.dtype.is_bool else self
        result: Tensor | None = None
        while k:
            if k & 1:
                result = base if result is None else result * base
            k >>= 1
            if k:
                base = base * base
        return Tensor.ones_like(base) if result is None else result

    @_operator
    def __le__(self, x: Operand) -> Tensor:
        a, b, sources = self._operands(x, "le")
        return self._derive(a <= b, *sources)  # UOp's <= is false where either side is NaN

    @_operator
    def __ge__(self, x: Operand) -> Tensor:
        a, b, sources = self._operands(x, "ge")
        return self._derive(a >= b, *sources)

    @_operator
    def __eq__(self, x: Operand) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPEQ, x, "eq")

    @_operator
    def __ne__(self, x: Operand) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPNE, x, "ne")

    def __invert__(self) -> Tensor:
        """~t: logical not of a bool tensor, bitwise not of an integer one, as in numpy and PyTorch."""
        if self.dtype.is_bool:
            return self.logical_not()
        if not self.dtype.is_int:
            raise TensorError(f"invert (~): needs a bool or integer tensor, got {self.dtype.name}")
        return self ^ (-1 if self.dtype.kind == "int" else self.dtype.max)

    def __abs__(self) -> Tensor:
        return self.abs()

    @_operator
    def __lshift__(self, x: Operand) -> Tensor:
        return self._bit_shift(x, "lshift", reverse=False)

    @_operator
    def __rlshift__(self, x: Operand) -> Tensor:
        return self._bit_shift(x, "lshift", reverse=True)

    @_operator
    def __rshift__(self, x: Operand) -> Tensor:
        return self._bit_shift(x, "rshift", reverse=False)

    @_operator
    def __rrshift__(self, x: Operand) -> Tensor:
        return self._bit_shift(x, "rshift", reverse=True)

    def _bit_shift(self, x: Operand, name: str, reverse: bool) -> Tensor:
        """a << b and a >> b as numpy's on integers: a times, or floor-divided by, 2 ** b. The IR has no shift
        op, and these two are what a shift means on two's-complement integers, so they need none. A shift by
        the dtype's width or more, or by a negative amount, gives 0 (-1 for a negative a shifted right), as
        numpy's does; two bools shift as int8, as in numpy."""
        a, b, sources = self._operands(x, name, reverse)
        if a.scalar_dtype.is_bool:
            a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
        dt = a.scalar_dtype
        if not dt.is_int:
            raise TensorError(f"{name}: shifts take integer or bool operands, got {dt.name}")
        if name == "lshift":
            fits = (b >= 0) & (b < dt.bits)
            return self._derive(fits.where(a * _power_of_two(fits.where(b, 0)), 0), *sources)
        # 2 ** (bits - 1) does not fit a signed dtype: shifting by bits - 1 keeps only the sign, as beyond
        fits = (b >= 0) & (b < dt.bits - (1 if dt.kind == "int" else 0))
        beyond = (a < 0).where(a.const_like(-1), a.const_like(0)) if dt.kind == "int" else a.const_like(0)
        return self._derive(fits.where(a // _power_of_two(fits.where(b, 0)), beyond), *sources)

    def _assign(self, new: Tensor, op: str) -> Tensor:
        """`t op= x` changes t itself, as in numpy and PyTorch, so every name for t sees the new value: `p -= lr * g`
        on a model's parameter updates the model. (Python would otherwise rebind the name `p` alone, and the model
        would never change.) A view is a new tensor, though: `row = t[0]; row += 1` leaves t as it was."""
        if new.shape != self.shape or new.dtype is not self.dtype:
            raise TensorError(
                f"{op}: the result, {new.dtype.name} of shape {new.shape}, would not fit the tensor, "
                f"{self.dtype.name} of shape {self.shape}; write t = t {op[:-1]} x for a new tensor"
            )
        leaf = self.requires_grad and realizer.leaves.get(id(self)) is self
        if leaf and Tensor._grad_enabled:
            raise TensorError(f"{op} on a leaf that requires grad: update it inside `with Tensor.no_grad():`")
        self.uop = new.realize().uop if leaf else new.uop  # a leaf stays a buffer, as requires_grad_ made it
        self.requires_grad = leaf or new.requires_grad
        return self

    @_operator
    def __iadd__(self, x: Operand) -> Tensor:
        return self._assign(self + x, "+=")

    @_operator
    def __isub__(self, x: Operand) -> Tensor:
        return self._assign(self - x, "-=")

    @_operator
    def __imul__(self, x: Operand) -> Tensor:
        return self._assign(self * x, "*=")

    @_operator
    def __itruediv__(self, x: Operand) -> Tensor:
        return self._assign(self / x, "/=")

    @_operator
    def __ifloordiv__(self, x: Operand) -> Tensor:
        return self._assign(self // x, "//=")

    @_operator
    def __imod__(self, x: Operand) -> Tensor:
        return self._assign(self % x, "%=")

    @_operator
    def __ipow__(self, x: Operand) -> Tensor:
        return self._assign(self**x, "**=")

    @_operator
    def __iand__(self, x: Operand) -> Tensor:
        return self._assign(self & x, "&=")

    @_operator
    def __ior__(self, x: Operand) -> Tensor:
        return self._assign(self | x, "|=")

    @_operator
    def __ixor__(self, x: Operand) -> Tensor:
        return self._assign(self ^ x, "^=")

    def __imatmul__(self, w: object) -> Tensor:
        return self._assign(self.matmul(w), "@=") if isinstance(w, Tensor) else cast(Tensor, NotImplemented)

    def isnan(self) -> Tensor:
        """True where the value is NaN, the one value not equal to itself."""
        return (
            self._binary(Ops.CMPNE, self, "isnan") if self.dtype.is_float else Tensor.zeros_like(self).cast(dtypes.bool)
        )

    def logical_not(self) -> Tensor:
        return self.cast(dtypes.bool)._binary(Ops.CMPNE, True, "logical_not")

    def where(self, a: Operand, b: Operand) -> Tensor:
        """`a` where this (boolean) tensor is true, else `b`; all three broadcast together."""
        ref = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
        a_t, b_t = _lift(a, ref, self.device), _lift(b, ref, self.device)
        if a_t.device != self.device or b_t.device != self.device:
            raise TensorError(f"where: tensors on different devices ({self.device}, {a_t.device}, {b_t.device})")
        dt = promote(a_t.dtype, b_t.dtype)
        cond = self.cast(dtypes.bool)
        shape = broadcast_shape("where", cond.shape, a_t.shape, b_t.shape)
        c, x, y = (t._broadcast_to(shape) for t in (cond, a_t.cast(dt), b_t.cast(dt)))
        return self._derive(c.uop.where(x.uop, y.uop), c, x, y)

    def ones_like(self, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        """Ones of this shape, this dtype unless told otherwise, on this device. Tensor.ones_like(t) also works."""
        kw.setdefault("device", self.device)
        return Tensor.full(self.shape, 1, self.dtype if dtype is None else dtype, **kw)

    def zeros_like(self, dtype: DTypeLike | None = None, **kw: Any) -> Tensor:
        """Zeros of this shape, this dtype unless told otherwise, on this device. Tensor.zeros_like(t) also works."""
        kw.setdefault("device", self.device)
        return Tensor.full(self.shape, 0, self.dtype if dtype is None else dtype, **kw)

    def abs(self) -> Tensor:
        """|x| = x * u, u being -1, 1, or x itself at 0 and NaN: the gradient at 0 is u = 0, as in PyTorch,
        |-0.0| = -0.0 * -0.0 = +0.0 and |NaN| = NaN, as in numpy."""
        if not self.dtype.is_float:
            return self * self.sign()
        return self * (self > 0).where(1.0, (self < 0).where(-1.0, self.detach()))

    def sign(self) -> Tensor:
        """-1, 0 or 1 in the tensor's dtype, and NaN for NaN (as in numpy); it carries no gradient (its
        derivative is 0 almost everywhere)."""
        steps = (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
        return self.isnan().where(self.detach(), steps) if self.dtype.is_float else steps

    def rsqrt(self) -> Tensor:
        return 1.0 / self.sqrt()

    def square(self) -> Tensor:
        return self * self

    def _float_math(self) -> tuple[Tensor, DType]:
        """This tensor in the dtype that float functions compute in, and the dtype of their result.

        float32 and float64 compute as they are; float16 and bfloat16 compute in float32 and are rounded
        back once, at the end; integers and bools give float32, as in PyTorch."""
        if self.dtype in (dtypes.float32, dtypes.float64):
            return self, self.dtype
        return self.float(), self.dtype if self.dtype.is_float else dtypes.float32

    def _minus_abs(self) -> Tensor:
        """-|x|, differentiated as the side of 0 it is on (abs's own gradient is 0 at 0, which would give
        sigmoid a gradient of 0 there)."""
        return (self < 0).where(self, -self)

    def sigmoid(self) -> Tensor:
        """1 / (1 + e^-x), built from e = e^-|x| <= 1: no step overflows, so no 0 * inf spoils the gradient."""
        x, out = self._float_math()
        e = x._minus_abs().exp()
        s = 1.0 / (1.0 + e)  # sigmoid(|x|); sigmoid(-|x|) = e * s
        return (x < 0).where(e * s, s).cast(out)

    def tanh(self) -> Tensor:
        """(1 - e) / (1 + e) with e = e^-2|x| <= 1, signed like x. Near 0, where 1 - e cancels, a Taylor
        polynomial instead: it keeps tanh(1e-10) = 1e-10 (to float64's precision below |x| = 1/16)."""
        x, out = self._float_math()
        small = x.abs() < 0.0625
        xs = small.where(x, 0.0)  # the polynomial sees only small x, so nothing in it can overflow
        x2 = xs * xs
        poly = xs * (1.0 + x2 * (-1 / 3 + x2 * (2 / 15 + x2 * (-17 / 315 + x2 * (62 / 2835)))))
        e = (2.0 * x._minus_abs()).exp()
        t = (1.0 - e) / (1.0 + e)
        return small.where(poly, (x < 0).where(-t, t)).cast(out)

    def relu(self) -> Tensor:
        """max(x, 0) with NaN kept and gradient 0 at 0, as in PyTorch."""
        return (self <= 0).where(0.0 if self.dtype.is_float else 0, self)

    def gelu(self, approximate: str = "none") -> Tensor:
        """GELU, x P(X <= x) for a standard normal X: exact ("none", through erf, PyTorch's default) or with
        PyTorch's tanh approximation ("tanh").

        The exact form is x erfc(-x / sqrt 2) / 2, which does not cancel for negative x as 1 + erf would. The
        tanh form 0.5 x (1 + tanh z) is written x sigmoid(2z), for the same reason; z comes from x clamped to
        [-30, 30], beyond which sigmoid(2z) is exactly 0 or 1 even in float64, and the clamp keeps x^3 and
        its derivative finite."""
        x, out = self._float_math()
        if approximate == "none":
            return (x * 0.5 * _erfc(x * -math.sqrt(0.5))).cast(out)
        if approximate != "tanh":
            raise TensorError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        xc = x.maximum(-30.0).minimum(30.0)
        z = math.sqrt(2.0 / math.pi) * (xc + 0.044715 * xc * xc * xc)
        return (x * (2.0 * z).sigmoid()).cast(out)

    def silu(self) -> Tensor:
        x, out = self._float_math()
        return (x * x.sigmoid()).cast(out)

    # ---- reductions ----
    def _reduce(self, op: Ops, axis: AxisArg, keepdim: bool, name: str) -> Tensor:
        axes = _axes(axis, self.shape, name)
        x = self.cast(_sum_dtype(self.dtype)) if op in (Ops.ADD, Ops.MUL) else self
        if not axes:
            return x
        if name in ("max", "min", "argmax", "argmin") and any(self.shape[a] == 0 for a in axes):
            raise TensorError(f"{name}: an axis of size 0 in {self.shape} has no {name}, as in numpy and PyTorch")
        out = x._derive(x.uop.reduce(op, axes), x)
        return out if keepdim else out.reshape(self._reduced_shape(axes))

    def _reduced_shape(self, axes: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(s for i, s in enumerate(self.shape) if i not in axes)

    def _count(self, axis: AxisArg, name: str) -> int:
        """How many elements a reduction over `axis` combines into each result."""
        return prod(self.shape[a] for a in _axes(axis, self.shape, name))

    def sum(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        return self._reduce(Ops.ADD, axis, keepdim, "sum")

    def max(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        return self._reduce(Ops.MAX, axis, keepdim, "max")

    def min(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        return self._reduce(Ops.MIN, axis, keepdim, "min")

    def mean(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        """Integers: their exact int64 sum, divided as float32. Floats: as `_float_math` says."""
        n = float(self._count(axis, "mean"))
        if not self.dtype.is_float:
            return self.sum(axis, keepdim).float() / n
        x, out = self._float_math()
        return (x.sum(axis, keepdim) / n).cast(out)

    def var(self, axis: AxisArg = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Variance with Bessel's correction by default (correction=1, as in PyTorch); 0 gives numpy's."""
        n = self._count(axis, "var")
        x, out = self._float_math()
        centered = x - x.mean(axis, keepdim=True)
        return (centered.square().sum(axis, keepdim) / float(max(n - correction, 0))).cast(out)

    def std(self, axis: AxisArg = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """sqrt(var), with gradient 0 where the values are all equal, as in PyTorch: there d sqrt(v)/dv is
        infinite and the centered values are 0, so the plain chain rule would give 0 * inf = NaN."""
        x, out = self._float_math()
        v = x.var(axis, keepdim, correction)
        flat = v == 0
        return flat.where(0.0, flat.where(1.0, v).sqrt()).cast(out)

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the first largest value along `axis` (of the flattened tensor when None), as int32."""
        return self._first_index(Ops.MAX, axis, keepdim)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the first smallest value: found with MIN, since negating wraps unsigned integers."""
        return self._first_index(Ops.MIN, axis, keepdim)

    def _first_index(self, op: Ops, axis: int | None, keepdim: bool) -> Tensor:
        name = "argmax" if op is Ops.MAX else "argmin"
        if axis is not None and not _is_index(axis):
            raise TensorError(f"{name}: axis must be one integer or None, got {axis!r}")
        if axis is None or not self.shape:
            flat = self.flatten()._first_index(op, 0, keepdim=False)
            return flat.reshape((1,) * self.ndim) if keepdim else flat
        (a,) = _axes(axis, self.shape, name)
        n = self.shape[a]
        best = self._reduce(op, a, True, "argmax")
        hit = (self == best) | self.isnan()  # a NaN is the extreme, as in numpy
        countdown = Tensor.arange(n, 0, -1, dtype=dtypes.int32, device=self.device).reshape(
            tuple(n if i == a else 1 for i in range(self.ndim))
        )
        first = hit.where(countdown, 0).max(a, keepdim=keepdim)
        return (n - first).detach()

    def logsumexp(self, axis: AxisArg = -1, keepdim: bool = False) -> Tensor:
        m = self._shift(axis)
        if self.dtype.is_float:  # an infinite max would give inf - inf = NaN: shift by the largest finite value
            # instead (0 if none), so that exp overflows for no finite element; the sum is then 0 or inf, its
            # log -inf or inf, and a finite element's gradient exp(x - shift) / inf is 0, as PyTorch's
            finite = self.isinf().where(-math.inf, self)._shift(axis)
            m = (m.abs() == math.inf).where((finite.abs() == math.inf).where(0.0, finite), m)
        out = (self - m).exp().sum(axis, keepdim=True).log() + m
        return out if keepdim else out.reshape(self._reduced_shape(_axes(axis, self.shape, "logsumexp")))

    def _shift(self, axis: AxisArg) -> Tensor:
        """The maximum that keeps exp from overflowing; over an axis of size 0, -inf (no element to shift)."""
        return self._reduce(Ops.MAX, axis, True, "shift").detach()

    def softmax(self, axis: int = -1) -> Tensor:
        e = (self - self._shift(axis)).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """(x - max) - log(sum(exp(x - max))), shifted by the maximum as softmax is (not by logsumexp's, which is 0
        for an infinite maximum), so it is NaN exactly where softmax is, as in PyTorch; x - logsumexp(x) would
        cancel at large |x|, losing the log."""
        shifted = self - self._shift(axis)
        return shifted - shifted.exp().sum(axis, keepdim=True).log()

    def one_hot(self, num_classes: int) -> Tensor:
        """A new last axis of length num_classes, 1 at each label and 0 elsewhere (int32)."""
        if not self.dtype.is_int:
            raise TensorError(f"one_hot needs integer labels, got {self.dtype.name}")
        if not _is_index(num_classes) or num_classes < 1:
            raise TensorError(f"one_hot: num_classes must be a positive integer, got {num_classes!r}")
        # labels are data: a bad one would silently be an all-zero row
        _check_index_tensor(self, functools.partial(_check_index_values, f"one_hot({num_classes})", n=num_classes))
        classes = Tensor.arange(num_classes, device=self.device)
        return (self.unsqueeze(-1) == classes).cast(dtypes.int32)

    # ---- movement ----
    def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
        if self.shape == shape:
            return self
        x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape)
        return x._derive(x.uop.expand(shape), x)

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        new = _shape_args(shape)
        if new.count(-1) > 1:
            raise TensorError(f"reshape: at most one -1 in {new}")
        if -1 in new:
            known = prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise TensorError(f"reshape: cannot infer -1 reshaping {self.shape} to {new}")
            new = tuple(self.numel() // known if s == -1 else s for s in new)
        if prod(new) != self.numel() or any(s < 0 for s in new):
            raise TensorError(f"reshape: cannot reshape {self.shape} ({self.numel()} elements) to {new}")
        return self if new == self.shape else self._derive(self.uop.reshape(new), self)

    def permute(self, *order: int | Sequence[int]) -> Tensor:
        dims = _shape_args(order)
        if len(dims) != self.ndim:
            raise TensorError(f"permute: {dims} is not a permutation of the {self.ndim} axes of {self.shape}")
        return self._derive(self.uop.permute(_axes(dims, self.shape, "permute")), self)

    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        order = list(range(self.ndim))
        (a,), (b,) = _axes(dim0, self.shape, "transpose"), _axes(dim1, self.shape, "transpose")
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:  # numpy's and PyTorch's name
        return self.permute(list(range(self.ndim))[::-1])

    def expand(self, *shape: int | Sequence[int]) -> Tensor:
        new = _shape_args(shape)
        lead = len(new) - self.ndim
        if lead < 0:
            raise TensorError(f"expand: cannot expand {self.shape} to fewer dimensions {new}")
        if any(s == -1 for s in new[:lead]) or any(s < 0 and s != -1 for s in new):
            raise TensorError(f"expand: sizes {new} must be >= 0, or -1 to keep an existing axis of {self.shape}")
        full = tuple(self.shape[i - lead] if s == -1 else s for i, s in enumerate(new))
        x = self.reshape((1,) * lead + self.shape) if lead else self
        if any(s not in (n, 1) for s, n in zip(x.shape, full, strict=True)):
            raise TensorError(f"expand: cannot expand {self.shape} to {new}; only axes of size 1 grow")
        return x if x.shape == full else x._derive(x.uop.expand(full), x)

    def shrink(self, bounds: Sequence[tuple[int, int] | None]) -> Tensor:
        """Keep [begin, end) of each axis (None keeps the whole axis)."""
        if len(bounds) != self.ndim:
            raise TensorError(f"shrink: {len(bounds)} bounds for a tensor with {self.ndim} dimensions")
        arg = _int_pairs("shrink", [(0, s) if b is None else b for b, s in zip(bounds, self.shape, strict=True)])
        if any(not 0 <= b <= e <= s for (b, e), s in zip(arg, self.shape, strict=True)):
            raise TensorError(f"shrink: bounds {arg} do not fit {self.shape}")
        return self._derive(self.uop.shrink(arg), self)

    def pad(self, padding: Sequence[tuple[int, int]], value: Scalar = 0.0) -> Tensor:
        """Pad each axis by (before, after) elements of `value`; negative widths cut elements off instead."""
        if len(padding) != self.ndim:
            raise TensorError(f"pad: {len(padding)} (before, after) pairs for a tensor with {self.ndim} dimensions")
        padding = _int_pairs("pad", padding)
        cut = [(max(0, -b), s - max(0, -a)) for (b, a), s in zip(padding, self.shape, strict=True)]
        if any(b > e for b, e in cut):
            raise TensorError(f"pad: widths {list(padding)} remove more than every element of {self.shape}")
        x = self.shrink(cut) if any(b or e != s for (b, e), s in zip(cut, self.shape, strict=True)) else self
        grow = [(max(0, b), max(0, a)) for b, a in padding]
        if all(b == a == 0 for b, a in grow):
            return x
        padded = x._derive(x.uop.pad(grow), x)
        if value == 0 and math.copysign(1.0, value) > 0:  # -0.0 == 0, but the padding PAD makes is +0.0
            return padded
        inside = Tensor.ones(*x.shape, dtype=dtypes.bool, device=self.device)
        mask = Tensor(inside.uop.pad(grow), device=self.device)
        return mask.where(padded, value)

    def flip(self, axis: AxisArg = None) -> Tensor:
        return self._derive(self.uop.flip(_axes(axis, self.shape, "flip")), self)

    def squeeze(self, dim: AxisArg = None) -> Tensor:
        """Remove the axes of size 1 among `dim` (an int or a tuple; None: all axes); others stay, as in PyTorch."""
        axes = _axes(dim, self.shape, "squeeze")
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes or s != 1))

    def unsqueeze(self, dim: int) -> Tensor:
        if not _is_index(dim):
            raise TensorError(f"unsqueeze: dim {dim!r} is not an integer")
        d = dim if dim >= 0 else self.ndim + 1 + dim
        if not 0 <= d <= self.ndim:
            raise TensorError(f"unsqueeze: dim {dim} is out of range for {self.ndim} dimensions")
        return self.reshape((*self.shape[:d], 1, *self.shape[d:]))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if not self.shape:
            return self.reshape(1)
        (s,), (e,) = _axes(start_dim, self.shape, "flatten"), _axes(end_dim, self.shape, "flatten")
        if s > e:
            raise TensorError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} in {self.shape}")
        return self.reshape((*self.shape[:s], prod(self.shape[s : e + 1]), *self.shape[e + 1 :]))

    def __getitem__(self, index: Any) -> Tensor:
        return _getitem(self, index)

    def cat(self: Tensor | Sequence[Tensor], *more: Tensor | Sequence[Tensor] | int, dim: int | None = None) -> Tensor:
        """Join tensors along an existing axis `dim`; every other axis must match, dtypes are promoted.

        `a.cat(b, c)`, `Tensor.cat(a, b, c)` and `Tensor.cat([a, b, c])` are one call: `a` is the first
        piece whichever way it is written. The axis is `dim=`, or a last positional int (`Tensor.cat([a, b], 1)`)."""
        tensors, d = _pieces("cat", self, more, dim)
        first = tensors[0]
        if first.ndim == 0:
            raise TensorError("cat: 0-d tensors have no axis to join along; stack them instead")
        (d,) = _axes(d, first.shape, "cat")
        for t in tensors[1:]:
            if t.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if i != d
            ):
                raise TensorError(f"cat: shapes {[x.shape for x in tensors]} differ outside dim {d}")
            if t.device != first.device:
                raise TensorError(f"cat: tensors on different devices ({first.device} and {t.device})")
        total, before, out = sum(t.shape[d] for t in tensors), 0, None
        for t in tensors:
            widths = [(before, total - before - t.shape[d]) if i == d else (0, 0) for i in range(t.ndim)]
            piece = t.pad(widths)
            if out is None:
                out = piece
            else:  # a select, not a sum of zero-padded pieces: -0.0 + 0.0 is +0.0
                inside = Tensor.ones(t.shape, dtype=dtypes.bool, device=t.device).pad(widths)
                out = inside.where(piece, out)
            before += t.shape[d]
        assert out is not None
        return out

    def stack(
        self: Tensor | Sequence[Tensor], *more: Tensor | Sequence[Tensor] | int, dim: int | None = None
    ) -> Tensor:
        """Join equal-shaped tensors along a new axis `dim`; called in the same ways as `cat`."""
        tensors, d = _pieces("stack", self, more, dim)
        if any(t.shape != tensors[0].shape for t in tensors):
            raise TensorError(f"stack: tensors must all have one shape, got {[t.shape for t in tensors]}")
        return Tensor.cat(*(t.unsqueeze(d) for t in tensors), dim=d)

    # ---- matrix products ----
    def matmul(self, w: Tensor) -> Tensor:
        """Matrix product with numpy's rules: 1-D operands get an axis, leading axes broadcast."""
        if not isinstance(w, Tensor):
            raise TensorError(f"matmul: needs a tensor, got a {type(w).__name__}")
        if self.ndim == 0 or w.ndim == 0:
            raise TensorError(f"matmul: operands must have at least 1 dimension, got {self.shape} and {w.shape}")
        x = self.unsqueeze(0) if self.ndim == 1 else self
        y = w.unsqueeze(-1) if w.ndim == 1 else w
        if x.shape[-1] != y.shape[-2]:
            raise TensorError(
                f"matmul: inner dimensions differ: {self.shape} @ {w.shape} ({x.shape[-1]} vs {y.shape[-2]})"
            )
        products = x.unsqueeze(-2) * y.transpose(-2, -1).unsqueeze(-3)
        out = products.sum(-1).cast(products.dtype)  # numpy's matmul keeps an integer dtype; sum widens it
        if self.ndim == 1:
            out = out.squeeze(-2)
        return out.squeeze(-1) if w.ndim == 1 else out

    def __matmul__(self, w: object) -> Tensor:
        return self.matmul(w) if isinstance(w, Tensor) else cast(Tensor, NotImplemented)

    def dot(self, w: Tensor) -> Tensor:
        return self.matmul(w)

    # ---- torch.add and torch.sub scale x by alpha (the other method names come with the operators) ----
    def add(self, x: Operand, alpha: Scalar = 1) -> Tensor:
        """self + alpha * x, as torch.add."""
        return self + (x if alpha == 1 else _scaled(x, alpha, "add"))

    def sub(self, x: Operand, alpha: Scalar = 1) -> Tensor:
        """self - alpha * x, as torch.sub."""
        return self - (x if alpha == 1 else _scaled(x, alpha, "sub"))

    # ---- more elementwise functions ----
    def clip(self, min: Operand | None = None, max: Operand | None = None) -> Tensor:
        """Values below `min` become `min` and values above `max` become `max`, as torch.clamp: NaN stays NaN,
        a NaN bound makes NaN, and where min > max everything is max. The gradient is PyTorch's too: 1 inside
        [min, max], bounds included, and 0 outside and at NaN."""
        if min is None and max is None:
            raise TensorError("clip: give min, max or both")
        out, inside = self.detach(), None
        if min is not None:
            out, inside = _bounded(out, min, out < min), self >= min
        if max is not None:
            out, inside = _bounded(out, max, out > max), self <= max if inside is None else inside & (self <= max)
        assert inside is not None
        return inside.where(self, out)

    clamp = clip

    def masked_fill(self, mask: Tensor, value: Operand) -> Tensor:
        """`value` where `mask` (broadcast to this tensor's shape) is true; the value takes this tensor's dtype."""
        if not _tensor_arg("masked_fill", mask).dtype.is_bool:
            raise TensorError(f"masked_fill: the mask must be a bool tensor, got {_describe(mask)}")
        if broadcast_shape("masked_fill", mask.shape, self.shape) != self.shape:
            raise TensorError(f"masked_fill: a mask of shape {mask.shape} does not broadcast to {self.shape}")
        if isinstance(value, Tensor):
            if value.ndim:
                raise TensorError(f"masked_fill: the value must be a number or a 0-d tensor, got shape {value.shape}")
            fill = value.cast(self.dtype)
        else:
            fill = Tensor.full((), value, self.dtype, device=self.device)
        return mask.where(fill, self)

    def trunc(self) -> Tensor:
        """The whole number toward zero."""
        return self._to_whole(lambda t, x: t)

    def floor(self) -> Tensor:
        return self._to_whole(lambda t, x: (t > x).where(t - 1.0, t))

    def ceil(self) -> Tensor:
        return self._to_whole(lambda t, x: (t < x).where(t + 1.0, t))

    def round(self) -> Tensor:
        """The nearest whole number, halves to the even one (2.5 -> 2, -0.5 -> -0.0), as numpy and PyTorch."""

        def half_to_even(t: Tensor, x: Tensor) -> Tensor:
            f = (t > x).where(t - 1.0, t)  # floor
            fraction = x - f  # exact: x and f are less than 1 apart
            odd = (f.cast(dtypes.int64) & 1) == 1
            return ((fraction > 0.5) | ((fraction == 0.5) & odd)).where(f + 1.0, f)

        return self._to_whole(half_to_even)

    def _to_whole(self, choose: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
        """A rounding function, with `choose(t, x)` picking the whole number near x from t = trunc(x).

        A float of magnitude 2^(p-1) or more (p bits of precision) is a whole number already, and so are inf
        and NaN; the rest are truncated through int64, where they all fit (casting the others would be
        undefined in C). A zero result keeps the sign of x, as in numpy (-0.5 rounds to -0.0). The result
        carries no gradient: its derivative is 0 wherever it exists. Integers are returned as they are."""
        if not self.dtype.is_float:
            return self
        x, out = self._float_math()
        small = x.abs() < 2.0 ** (_PRECISION[x.dtype] - 1)  # false for inf and NaN
        t = small.where(x, 0.0).cast(dtypes.int64).cast(x.dtype)
        chosen = choose(t, x)
        signed = (chosen == 0).where(x * 0.0, chosen)  # x is finite here
        return small.where(signed, x).cast(out).detach()

    def log2(self) -> Tensor:
        x, out = self._float_math()
        return (x.log() * (1.0 / math.log(2.0))).cast(out)

    def exp2(self) -> Tensor:
        """2^x, through POW, exact at whole x."""
        x, out = self._float_math()
        return (2.0**x).cast(out)

    def isinf(self) -> Tensor:
        if not self.dtype.is_float:
            return Tensor.full(self.shape, False, dtypes.bool, device=self.device)
        return (self == math.inf) | (self == -math.inf)

    def isfinite(self) -> Tensor:
        if not self.dtype.is_float:
            return Tensor.full(self.shape, True, dtypes.bool, device=self.device)
        return self.abs() < math.inf  # false for inf and NaN

    def erf(self) -> Tensor:
        """The error function, 2/sqrt(pi) times the integral of e^(-t^2) from 0 to x: its Taylor series
        below |x| = 2 and 1 - erfc(|x|), by Laplace's continued fraction, above (see `_erf_parts`)."""
        x, out = self._float_math()
        small, series, erfc = _erf_parts(x)
        return small.where(series, (x < 0).where(erfc - 1.0, 1.0 - erfc)).cast(out)

    def leaky_relu(self, negative_slope: builtins.float = 0.01) -> Tensor:
        """x above 0, negative_slope * x below (and at 0, where the gradient is negative_slope, as in PyTorch)."""
        x, out = self._float_math()
        return (x > 0).where(x, x * negative_slope).cast(out)

    def elu(self, alpha: builtins.float = 1.0) -> Tensor:
        """x above 0, alpha (e^x - 1) below: e^x - 1 is 2 tanh(x/2) / (1 - tanh(x/2)), which keeps its digits
        near 0, where e^x - 1 would cancel."""
        x, out = self._float_math()
        below = x <= 0  # NaN takes the upper branch, with gradient 1, as in PyTorch
        half = (below.where(x, 0.0) * 0.5).tanh()  # the lower branch sees no positive x: nothing overflows
        return below.where(alpha * (2.0 * half / (1.0 - half)), x).cast(out)

    def softplus(self, beta: builtins.float = 1.0, threshold: builtins.float = 20.0) -> Tensor:
        """log(1 + e^(beta x)) / beta, and x itself where beta x > threshold, as in PyTorch."""
        x, out = self._float_math()
        z = x * beta
        return (z > threshold).where(x, _softplus(z) / beta).cast(out)

    def relu6(self) -> Tensor:
        """min(max(x, 0), 6), with gradient 0 at both corners, as PyTorch's hardtanh has."""
        zero, six = (0.0, 6.0) if self.dtype.is_float else (0, 6)
        return (self <= zero).where(zero, (self >= six).where(six, self))

    def hardswish(self) -> Tensor:
        """x relu6(x + 3) / 6, written piece by piece so that the gradient at -3 and 3 is PyTorch's: the
        outer pieces own the ends (0 at -3, 1 at 3), where the pieces' values agree."""
        x, out = self._float_math()
        xc = x.clip(-3.0, 3.0)  # the middle piece sees no infinity, whose gradient there would be 0 * inf
        return (x <= -3.0).where(x * 0.0, (x < 3.0).where(xc * (xc + 3.0) / 6.0, x)).cast(out)

    # ---- more reductions ----
    def prod(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        """The product; integers multiply in int64 (uint64 if unsigned), as sums do. The gradient is PyTorch's
        prod / x, with the zeros handled apart (autodiff's rule for a MUL reduction)."""
        return self._reduce(Ops.MUL, axis, keepdim, "prod")

    def any(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        """Whether any element is nonzero (NaN is nonzero), as bool."""
        return (self != 0)._reduce(Ops.MAX, axis, keepdim, "any")

    def all(self, axis: AxisArg = None, keepdim: bool = False) -> Tensor:
        """Whether every element is nonzero (NaN is nonzero), as bool."""
        return (self != 0)._reduce(Ops.MIN, axis, keepdim, "all")

    def cumsum(self, axis: int = 0) -> Tensor:
        """Running sums along `axis`: element i is the sum of elements 0..i, each a masked sum of the whole
        axis (n^2 additions for an axis of n, all in one kernel). Integers sum in int64, as numpy's do."""
        if not _axes(axis, self.shape, "cumsum"):  # a 0-d tensor: its own running sum
            return self._reduce(Ops.ADD, None, False, "cumsum")
        (a,) = _axes(axis, self.shape, "cumsum")
        x = self.transpose(a, -1)
        n = x.shape[-1]
        upto = Tensor.arange(n, device=self.device)
        lower = upto.reshape(n, 1) >= upto.reshape(1, n)  # lower[i, j]: term j is part of sum i
        out = lower.where(x.unsqueeze(-2), 0).sum(-1)
        return out.transpose(a, -1)

    # ---- selecting by index ----
    def gather(self, dim: int, index: Tensor) -> Tensor:
        """`out[i][j] = self[index[i][j]][j]` for dim 0, `self[i][index[i][j]]` for dim 1, and so on, as
        torch.gather. `index` has as many axes as this tensor and is no longer on any but `dim`.

        There is no gather op: each output element compares its index with 0 .. n-1 (a one-hot row) and sums
        the one element of its row of `self` that the comparison selects. Indices are checked (computed, if
        they are lazy): an index out of range would silently select nothing."""
        (d,) = _axes(dim, self.shape, "gather")
        if not _tensor_arg("gather", index).dtype.is_int or index.ndim != self.ndim:
            raise TensorError(f"gather: index must be an integer tensor of {self.ndim} axes, got {_describe(index)}")
        if any(index.shape[i] > self.shape[i] for i in range(self.ndim) if i != d):
            raise TensorError(f"gather: index of shape {index.shape} is longer than {self.shape} off dim {d}")
        n = self.shape[d]
        _check_index_tensor(index, functools.partial(_check_index_values, "gather", n=n))
        rows = self.shrink([None if i == d else (0, index.shape[i]) for i in range(self.ndim)])
        rows = rows.unsqueeze(-1).transpose(d, -1)  # axis d now has size 1, and a last axis the n candidates
        hit = index.unsqueeze(-1) == Tensor.arange(n, dtype=index.dtype, device=self.device)  # no cast to make
        return _pick(rows, hit)

    def scatter(self, dim: int, index: Tensor, src: Tensor | Scalar) -> Tensor:
        """A copy of this tensor with `self[index[i][j]][j] = src[i][j]` for dim 0 (and so on), as
        torch.scatter; `src` may be a number. Two writes to one place would make the result depend on their
        order, so they are refused: add them up with scatter_add instead."""
        return self._scatter(dim, index, src, "scatter")

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy of this tensor with `src[i][j]` added to `self[index[i][j]][j]` for dim 0 (and so on), every
        write counted, as torch.scatter_add."""
        return self._scatter(dim, index, src, "scatter_add")

    def _scatter(self, dim: int, index: Tensor, src: Tensor | Scalar, op: str) -> Tensor:
        """The one-hot comparison of `gather`, summed over the index axis instead of the candidates: each
        place of the result adds up the elements of `src` aimed at it, and counts them."""
        (d,) = _axes(dim, self.shape, op)
        if not _tensor_arg(op, index).dtype.is_int or index.ndim != self.ndim:
            raise TensorError(f"{op}: index must be an integer tensor of {self.ndim} axes, got {_describe(index)}")
        values = src if isinstance(src, Tensor) else Tensor.full(index.shape, src, self.dtype, device=self.device)
        if values.dtype is not self.dtype or values.ndim != self.ndim:
            raise TensorError(f"{op}: src must be a {self.dtype.name} tensor of {self.ndim} axes, got {_describe(src)}")
        if any(a > b for a, b in zip(index.shape, values.shape, strict=True)) or any(
            index.shape[i] > self.shape[i] for i in range(self.ndim) if i != d
        ):
            raise TensorError(f"{op}: index {index.shape} is longer than src {values.shape} or self {self.shape}")
        n = self.shape[d]
        taken = _check_indices(op, index, n, negative=False)
        if op == "scatter" and (np.diff(np.sort(taken, axis=d), axis=d) == 0).any():
            raise TensorError(f"scatter: two elements of index along dim {d} name one place; use scatter_add")
        values = values.shrink([(0, s) for s in index.shape])
        hit = index.unsqueeze(-1) == Tensor.arange(n, dtype=index.dtype, device=self.device)  # (*index.shape, n)
        sums = hit.where(values.unsqueeze(-1), 0).sum(d, keepdim=True).cast(self.dtype)
        widths = [(0, 0) if i == d else (0, self.shape[i] - index.shape[i]) for i in range(self.ndim)]
        placed = sums.transpose(d, -1).squeeze(-1).pad(widths)  # the candidate axis becomes axis d
        if op == "scatter_add":
            return self + placed
        aimed = hit.max(d, keepdim=True).transpose(d, -1).squeeze(-1).pad(widths)
        return aimed.where(placed, self)

    def tril(self, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two axes: elements with column - row <= diagonal; zeros above."""
        return self._triangle(diagonal, "tril")

    def triu(self, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two axes: elements with column - row >= diagonal; zeros below."""
        return self._triangle(diagonal, "triu")

    def _triangle(self, diagonal: int, op: str) -> Tensor:
        if self.ndim < 2:
            raise TensorError(f"{op}: needs at least 2 dimensions, got shape {self.shape}")
        if not _is_index(diagonal):
            raise TensorError(f"{op}: diagonal must be an integer, got {diagonal!r}")
        rows, cols = self.shape[-2:]
        col = Tensor.arange(cols, device=self.device).reshape(1, cols)
        last = Tensor.arange(diagonal, diagonal + rows, device=self.device).reshape(rows, 1)  # row + diagonal
        keep = col <= last if op == "tril" else col >= last
        return keep.where(self, Tensor.full((), 0, self.dtype, device=self.device))

    def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(values, indices) along `dim`, in order, as torch.sort(stable=True): equal values keep their
        order, and NaN counts as larger than every number. Indices are int32.

        Each element's place in the result is the number of elements that go before it (an n x n
        comparison); the values are then gathered by place, with the one-hot select of `gather`."""
        (d,) = _axes(dim, self.shape, "sort")
        if not self.shape:
            return self, Tensor.full((), 0, dtypes.int32, device=self.device)
        x = self.transpose(d, -1)
        n = x.shape[-1]
        order = Tensor.arange(n, device=self.device)
        mine, other = x.unsqueeze(-1), x.unsqueeze(-2)  # element i along axis -2, element j along axis -1
        first = _comes_before(other, mine, descending) | (_same_key(other, mine) & (order < order.reshape(n, 1)))
        place = first.sum(-1).cast(dtypes.int32)  # how many elements go before element i
        hit = place.unsqueeze(-2) == order.reshape(n, 1)  # hit[p, i]: element i goes to place p
        values = _pick(x.unsqueeze(-2), hit)
        indices = _pick(order.expand(n, n), hit)._broadcast_to(values.shape)
        return values.transpose(d, -1), indices.transpose(d, -1)

    def topk(self, k: int, dim: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
        """The k largest (or smallest) elements along `dim` and their indices, largest first (smallest
        first), as torch.topk with sorted=True; NaN counts as the largest."""
        (d,) = _axes(dim, self.shape, "topk")
        n = self.shape[d] if self.shape else 1
        if not _is_index(k) or not 1 <= k <= n:
            raise TensorError(f"topk: k must be an integer from 1 to {n} for shape {self.shape}, got {k!r}")
        values, indices = self.sort(dim, descending=largest)
        if not self.shape:
            return values, indices
        keep: list[tuple[int, int] | None] = [None] * self.ndim
        keep[d] = (0, k)
        return values.shrink(keep), indices.shrink(keep)

    def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """Category indices (int32) drawn with probabilities proportional to this tensor's rows (1-D or 2-D),
        with uniform numbers from the generator that Tensor.manual_seed seeds.

        With replacement, each draw is the first category whose running sum passes a uniform number times
        the total. Without, each category's key is an exponential draw divided by its weight, and the
        num_samples smallest keys win: the same distribution as drawing one at a time and removing it."""
        if self.ndim not in (1, 2) or not self.dtype.is_float:
            raise TensorError(f"multinomial: needs a 1-D or 2-D float tensor of weights, got {_describe(self)}")
        weights = self.numpy().reshape(-1, self.shape[-1])  # checked now: a bad weight would bias every draw
        if not np.isfinite(weights).all() or (weights < 0).any() or (weights.sum(-1) <= 0).any():
            raise TensorError("multinomial: weights must be finite, >= 0, and not all 0 in a row")
        if not _is_index(num_samples) or num_samples < 1:
            raise TensorError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
        if not replacement and num_samples > (weights > 0).sum(-1).min():
            raise TensorError(f"multinomial: {num_samples} samples without replacement, but a row has fewer categories")
        p = Tensor(weights, dtype=dtypes.float64, device=self.device)
        if replacement:
            u = Tensor.rand(p.shape[0], num_samples, dtype=dtypes.float64, device=self.device)
            running = p.cumsum(-1)
            running = running / running[:, -1:]  # ends at exactly 1, above every uniform draw
            drawn = (u.unsqueeze(-1) >= running.unsqueeze(-2)).sum(-1)
        else:
            exponential = -(1.0 - Tensor.rand(*p.shape, dtype=dtypes.float64, device=self.device)).log()
            drawn = (exponential / p).topk(num_samples, -1, largest=False)[1]
        return drawn.cast(dtypes.int32).reshape(*self.shape[:-1], num_samples)

    # ---- splitting and regrouping axes ----
    def split(self, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces along `dim`: of split_size_or_sections elements each (the last one shorter if need be), or
        of the listed sizes, which must add up to the axis; as torch.split."""
        (d,) = _axes(dim, self.shape, "split")
        if not self.shape:
            raise TensorError("split: a 0-d tensor has no axis to split")
        n = self.shape[d]
        if _is_index(split_size_or_sections):
            size = operator.index(split_size_or_sections)
            if size < 1:
                raise TensorError(f"split: the size of a piece must be >= 1, got {size}")
            sizes = [size] * (n // size) + ([n % size] if n % size else [])
        else:
            sizes = list(_shape_args([split_size_or_sections]))
            if sum(sizes) != n or any(s < 1 for s in sizes):
                raise TensorError(f"split: sizes {sizes} must be >= 1 and add up to {n}, the length of dim {d}")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return tuple(
            self.shrink([(b, b + s) if i == d else None for i in range(self.ndim)])
            for b, s in zip(starts, sizes, strict=True)
        )

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most `chunks` pieces of equal length along `dim` (the last one shorter), as torch.chunk."""
        if not _is_index(chunks) or chunks < 1:
            raise TensorError(f"chunk: chunks must be a positive integer, got {chunks!r}")
        (d,) = _axes(dim, self.shape, "chunk")
        n = self.shape[d] if self.shape else 1
        return self.split(-(-n // chunks), d)

    def view(self, *shape: int | Sequence[int]) -> Tensor:
        """The same elements in another shape: a reshape (a uopc tensor is never strided, so every reshape is
        a view). PyTorch's view(dtype), a reinterpretation of the bits, is not supported."""
        if any(isinstance(s, (DType, np.dtype, type)) for s in shape):
            raise TensorError("view: reinterpreting the bits as another dtype is not supported; use cast()")
        return self.reshape(*shape)

    def repeat(self, *repeats: int | Sequence[int]) -> Tensor:
        """The tensor tiled repeats[i] times along axis i, as torch.repeat (numpy's tile); more repeats than
        axes add leading axes. An expand of new axes, then a reshape that merges each with its axis."""
        reps = _shape_args(repeats)
        if len(reps) < self.ndim or any(r < 1 for r in reps):
            raise TensorError(f"repeat: needs a count >= 1 for each of the {self.ndim} axes of {self.shape}: {reps}")
        x = self.reshape((1,) * (len(reps) - self.ndim) + self.shape)
        paired = x.reshape(tuple(v for s in x.shape for v in (1, s)))
        tiled = paired.expand(tuple(v for r, s in zip(reps, x.shape, strict=True) for v in (r, s)))
        return tiled.reshape(tuple(r * s for r, s in zip(reps, x.shape, strict=True)))

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """Axis `dim` split into axes of `sizes` (one may be -1), the inverse of flatten."""
        (d,) = _axes(dim, self.shape, "unflatten")
        if not self.shape:
            raise TensorError("unflatten: a 0-d tensor has no axis to split")
        new = _shape_args([sizes])
        known = prod(s for s in new if s != -1)
        if new.count(-1) > 1 or known < 1 or (self.shape[d] % known if -1 in new else known != self.shape[d]):
            raise TensorError(f"unflatten: sizes {new} do not split dim {d} of {self.shape}")
        whole = tuple(self.shape[d] // known if s == -1 else s for s in new)
        return self.reshape((*self.shape[:d], *whole, *self.shape[d + 1 :]))

    # ---- losses ----
    def nll_loss(self, target: Tensor, reduction: str = "mean", ignore_index: int = -100) -> Tensor:
        """The negative log-likelihood of class indices `target` (...) under these log-probabilities
        (..., classes), classes on the last axis; targets equal to ignore_index count for nothing."""
        picked, kept = self._log_likelihood(target, ignore_index, "nll_loss")
        return _reduced(-picked, reduction, kept, "nll_loss")

    def _log_likelihood(self, target: Tensor, ignore_index: int, op: str) -> tuple[Tensor, Tensor]:
        """Each target's entry of the last axis (0 where ignored), and where the targets are not ignored."""
        if not _tensor_arg(op, target).dtype.is_int:
            raise TensorError(f"{op}: targets must be an integer tensor of class indices, got {_describe(target)}")
        if self.ndim == 0 or target.shape != self.shape[:-1]:
            raise TensorError(
                f"{op}: input {self.shape} (classes on the last axis) needs targets of shape {self.shape[:-1]}, "
                f"got {target.shape}"
            )
        # targets are data, checked now: from numpy they are a buffer, read with no kernel
        _check_index_tensor(target, functools.partial(_check_targets, op, self.shape[-1], ignore_index))
        kept = target != ignore_index
        labels = kept.where(target, 0)
        hit = labels.unsqueeze(-1) == Tensor.arange(self.shape[-1], dtype=labels.dtype, device=self.device)
        # a select, not a product with the one-hot: a class masked out by a -inf logit has log-probability
        # -inf, and -inf * 0 is NaN
        return kept.where(_pick(self, hit), 0.0), kept

    def cross_entropy(
        self,
        target: Tensor,
        reduction: str = "mean",
        label_smoothing: builtins.float = 0.0,
        ignore_index: int = -100,
    ) -> Tensor:
        """Cross-entropy of these logits (..., classes), classes on the LAST axis (PyTorch's are on axis 1 for
        3 or more axes), against class indices (...) or class probabilities (..., classes), as
        torch.nn.functional.cross_entropy: label_smoothing mixes the targets with a uniform distribution,
        targets equal to ignore_index count for nothing (also in the mean's denominator)."""
        if not 0.0 <= label_smoothing <= 1.0:
            raise TensorError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
        logp = self.log_softmax(-1)
        if _tensor_arg("cross_entropy", target).dtype.is_float:
            if target.shape != self.shape:
                raise TensorError(f"cross_entropy: probabilities {target.shape} and logits {self.shape} differ")
            smoothed = target * (1.0 - label_smoothing) + label_smoothing / self.shape[-1]
            return _reduced(-(smoothed * logp).sum(-1), reduction, None, "cross_entropy")
        picked, kept = logp._log_likelihood(target, ignore_index, "cross_entropy")
        loss = -picked
        if label_smoothing:
            uniform = kept.where(-logp.mean(-1), 0.0)
            loss = loss * (1.0 - label_smoothing) + uniform * label_smoothing
        return _reduced(loss, reduction, kept, "cross_entropy")

    def binary_cross_entropy(self, target: Tensor, reduction: str = "mean") -> Tensor:
        """-(y log p + (1 - y) log(1 - p)) for probabilities p (this tensor) and targets y in [0, 1], each log
        clamped at -100 as PyTorch does, so that p = 0 or 1 gives a finite loss."""
        y = self._loss_target(target, "binary_cross_entropy")
        log_p, log_q = self.log().maximum(-100.0), (1.0 - self).log().maximum(-100.0)
        return _reduced(-(y * log_p + (1.0 - y) * log_q), reduction, None, "binary_cross_entropy")

    def binary_cross_entropy_with_logits(self, target: Tensor, reduction: str = "mean") -> Tensor:
        """binary_cross_entropy of sigmoid(x), computed from x as softplus(x) - x y: finite for any logit."""
        y = self._loss_target(target, "binary_cross_entropy_with_logits")
        x, out = self._float_math()
        return _reduced((_softplus(x) - x * y).cast(out), reduction, None, "binary_cross_entropy_with_logits")

    def _loss_target(self, target: Tensor, op: str) -> Tensor:
        if _tensor_arg(op, target).shape != self.shape or not self.dtype.is_float:
            raise TensorError(f"{op}: needs float input and a target of its shape; got {self.shape} and {target.shape}")
        return target

    # ---- convolution, pooling, attention ----
    def conv2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
    ) -> Tensor:
        """2-D convolution (cross-correlation, as in PyTorch) of images (N, C_in, H, W) or (C_in, H, W) with
        `weight` (C_out, C_in / groups, kH, kW); padding is a number per side, or "valid" or "same".

        The windows of the padded image are copied once into a matrix of (C_in kH kW) rows and N H_out W_out
        columns (`_im2col`); the output is the weight, a (C_out, C_in kH kW) matrix per group, times it: a
        matrix product long enough along its columns for Chapter 13's packed kernel, forward and backward."""
        x = self._images("conv2d")
        if _tensor_arg("conv2d", weight).ndim != 4:
            raise TensorError(f"conv2d: weight must be a tensor (C_out, C_in / groups, kH, kW): {_describe(weight)}")
        n, c_in = x.shape[:2]
        c_out, per_group, kh, kw = weight.shape
        if not _is_index(groups) or groups < 1 or c_in != per_group * groups or c_out % groups:
            raise TensorError(
                f"conv2d: input channels {c_in} and weight {weight.shape} do not fit groups={groups} "
                "(C_in must be groups * weight.shape[1], and C_out a multiple of groups)"
            )
        if bias is not None and _tensor_arg("conv2d", bias).shape != (c_out,):
            raise TensorError(f"conv2d: bias must have shape ({c_out},), one per output channel, got {bias.shape}")
        if not is_realized(x.uop):  # each element is read kH * kW times: compute it once, into a plain buffer
            x = x.contiguous()
        s, d = _pair("conv2d", "stride", stride), _pair("conv2d", "dilation", dilation)
        cols = _im2col(x.pad(_conv_padding(padding, (kh, kw), s, d)), (kh, kw), s, d)
        oh, ow = cols.shape[-2:]
        rows = per_group * kh * kw
        products = weight.reshape(groups, c_out // groups, rows) @ cols.reshape(groups, rows, n * oh * ow).contiguous()
        out = products.reshape(c_out, n, oh, ow).permute(1, 0, 2, 3)
        if bias is not None:
            out = out + bias.reshape(1, c_out, 1, 1)
        return out if self.ndim == 4 else out.reshape(c_out, oh, ow)

    def _images(self, op: str) -> Tensor:
        """This tensor as a batch of images (N, C, H, W); a single image (C, H, W) gets a batch of 1."""
        if self.ndim not in (3, 4):
            raise TensorError(f"{op}: needs images (N, C, H, W) or (C, H, W), got shape {self.shape}")
        return self if self.ndim == 4 else self.unsqueeze(0)

    def max_pool2d(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
    ) -> Tensor:
        """The largest element of each window (stride defaults to the kernel size; padding counts as -inf).
        As in PyTorch, the whole gradient goes to the window's first largest element (a NaN is the largest)."""
        x = self._images("max_pool2d")
        k = _pair("max_pool2d", "kernel_size", kernel_size)
        low = -math.inf if self.dtype.is_float else self.dtype.min
        s, d = _pair("max_pool2d", "stride", k if stride is None else stride), _pair("max_pool2d", "dilation", dilation)
        win = _windows(x.pad(_pool_padding("max_pool2d", padding, k), low), k, s, d, "max_pool2d")
        flat = win.flatten(-2)
        first = flat.argmax(-1, keepdim=True) == Tensor.arange(flat.shape[-1], device=self.device)
        out = _pick(flat, first)
        return out if self.ndim == 4 else out.squeeze(0)

    def avg_pool2d(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
        count_include_pad: bool = True,
    ) -> Tensor:
        """The mean of each window (stride defaults to the kernel size; padding counts as 0, and is part of
        the count unless count_include_pad is False)."""
        x = self._images("avg_pool2d")
        k = _pair("avg_pool2d", "kernel_size", kernel_size)
        s = _pair("avg_pool2d", "stride", k if stride is None else stride)
        pads = _pool_padding("avg_pool2d", padding, k)
        sums = _windows(x.pad(pads), k, s, (1, 1), "avg_pool2d").sum((-2, -1))
        if count_include_pad:
            out = sums / float(k[0] * k[1])
        else:
            ones = Tensor.ones(*x.shape[-2:], dtype=x.dtype, device=self.device).pad(pads[-2:])
            out = sums / _windows(ones, k, s, (1, 1), "avg_pool2d").sum((-2, -1))
        return out if self.ndim == 4 else out.squeeze(0)

    def scaled_dot_product_attention(
        self,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        scale: builtins.float | None = None,
        *,
        kernel: str = "plain",
    ) -> Tensor:
        """softmax(q k^T scale + mask) v for queries (this tensor, (..., L, E)), keys (..., S, E) and values
        (..., S, Ev), as torch.nn.functional.scaled_dot_product_attention: scale defaults to 1/sqrt(E); a
        bool attn_mask says which keys each query may see (True: it may), a float one is added to the
        scores; is_causal lets query i see keys 0..i. A query that may see no key at all gets 0s.

        kernel="plain" materializes the scores (the composition below). kernel="online" computes each query
        in one pass over the keys with online softmax, and kernel="tiled" blocks of queries over blocks of
        keys (flash attention), each in a kernel of its own (uopc.tensor.attention), for q, k and v of one
        leading shape and no attn_mask."""
        if self.ndim < 2 or key.ndim < 2 or value.ndim < 2 or key.shape[-2] != value.shape[-2]:
            raise TensorError(
                f"scaled_dot_product_attention: query {self.shape}, key {key.shape} and value {value.shape} "
                "need (..., L, E), (..., S, E) and (..., S, Ev)"
            )
        if is_causal and attn_mask is not None:
            raise TensorError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
        factor = 1.0 / math.sqrt(self.shape[-1]) if scale is None else scale
        if kernel in ("online", "tiled"):
            if attn_mask is not None or not self.shape[:-2] == key.shape[:-2] == value.shape[:-2]:
                raise TensorError(
                    f"scaled_dot_product_attention ({kernel}): takes no attn_mask, and q, k and v of one leading "
                    f"shape; got query {self.shape}, key {key.shape} and value {value.shape}"
                )
            return kernel_attention(self, key, value, is_causal, factor, kernel)
        if kernel != "plain":
            raise TensorError(f"scaled_dot_product_attention: kernel is 'plain', 'online' or 'tiled', not {kernel!r}")
        if self.dtype in (dtypes.float16, dtypes.bfloat16):
            # as PyTorch: in float32, rounded once at the end; rounding p and out to 16 bits on the way left
            # dq a 16-bit rounding of (dO . v - dO . out) where that difference is exactly 0 (notes.md entry 113)
            mask = attn_mask.float() if attn_mask is not None and not attn_mask.dtype.is_bool else attn_mask
            wide = self.float().scaled_dot_product_attention(key.float(), value.float(), mask, is_causal, factor)
            return wide.cast(self.dtype)
        scores = (self @ key.transpose(-2, -1)) * factor
        if is_causal:
            length, keys = scores.shape[-2:]
            attn_mask = Tensor.ones(length, keys, dtype=dtypes.bool, device=self.device).tril()
        if attn_mask is None:
            return scores.softmax(-1) @ value
        scores = attn_mask.where(scores, -math.inf) if attn_mask.dtype.is_bool else scores + attn_mask
        shut = (scores == -math.inf).all(-1, keepdim=True)  # a query that may see no key gets 0, as in PyTorch
        return shut.where(0.0, shut.where(0.0, scores).softmax(-1)) @ value


def _sum_dtype(dt: DType) -> DType:
    """numpy's: bools and signed integers sum in int64, unsigned integers in uint64, floats in their dtype."""
    if dt.is_float:
        return dt
    return dtypes.uint64 if dt.kind == "uint" else dtypes.int64


# the operation each op is in messages; a reversed CMPLT is "gt" (a > b is b < a)
_OP_NAMES = {
    Ops.ADD: "add",
    Ops.SUB: "sub",
    Ops.MUL: "mul",
    Ops.DIV: "div",
    Ops.IDIV: "floordiv",
    Ops.MOD: "mod",
    Ops.POW: "pow",
    Ops.MAX: "maximum",
    Ops.MIN: "minimum",
    Ops.CMPLT: "lt",
    Ops.CMPEQ: "eq",
    Ops.CMPNE: "ne",
    Ops.AND: "and",
    Ops.OR: "or",
    Ops.XOR: "xor",
}

# numpy and PyTorch add and multiply bools as logical or and and (the result stays bool)
_BOOL_ARITHMETIC = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND}


def _integer_power(base: UOp, exponent: UOp) -> UOp:
    """base ** exponent for integers of one dtype, wrapping as their products do: square and multiply from
    the exponent's highest bit down, one step for each bit of its dtype, each a where, so it stays one
    elementwise kernel.

    The squares are of the result, never of the base: where the base is a choice between two values that
    are the same in every iteration (`mask.where(k, 0) ** e` with a 0-d `k`), 31 squares of it sent gcc's
    partial redundancy elimination into minutes and gigabytes, growing twofold with every square.

    A negative exponent gives 0 except for the bases 1 and -1, as in PyTorch (numpy refuses). For those two
    the steps are right as they are: of the exponent's two's-complement bits only the lowest counts, and it
    is the exponent's parity; every other base gets its 0 at the end."""
    dt = base.scalar_dtype
    result = base.const_like(1)
    for bit in reversed(range(dt.bits)):
        result = result * result
        result = (exponent & round_to(dt, 1 << bit)).ne(0).where(result * base, result)
    unit = base.eq(1) | base.eq(round_to(dt, -1))
    return ((exponent < 0) & unit.logical_not()).where(0, result)


def _power_of_two(exponent: UOp) -> UOp:
    """2 ** exponent in the exponent's integer dtype, for 0 <= exponent < its width (wrapping at the top bit)."""
    return _integer_power(exponent.const_like(2), exponent)


def _python_scalar(v: Any, op: str) -> Scalar:
    """A Python bool, int or float; numpy scalars become the Python value they hold."""
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (bool, int, float)):
        raise TensorError(f"{op}: cannot combine a tensor with a {type(v).__name__}; make it a Tensor first")
    return v


def is_realized(u: UOp) -> bool:
    """A BUFFER, or a BUFFER given its shape: the form a tensor takes once computed."""
    return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)


def _lift(v: Operand, like: Tensor | None, device: str) -> Tensor:
    """A scalar as a 0-d tensor of `like`'s dtype (a float makes an integer float32, an int makes a bool int32)."""
    if isinstance(v, Tensor):
        return v
    value = _python_scalar(v, "where")
    dt = dtypes.from_python(value) if like is None else like.dtype
    if isinstance(value, float) and not dt.is_float:
        dt = dtypes.float32
    elif isinstance(value, int) and not isinstance(value, bool) and dt.is_bool:
        dt = dtypes.default_int  # as in _operands: an int is no bool
    return Tensor.full((), value, dt, device=device)


def _pieces(
    op: str, first: Tensor | Sequence[Tensor], more: Sequence[Tensor | Sequence[Tensor] | int], dim: int | None
) -> tuple[list[Tensor], int]:
    """The tensors of a cat or stack, however they were passed, and the axis to join them along."""
    items, last = [first, *more], more[-1] if more else None
    if _is_index(last):  # torch.cat(tensors, 1): the axis given by position
        if dim is not None:
            raise TensorError(f"{op}: the axis is given twice, as {last} and as dim={dim}")
        items.pop()
        dim = operator.index(last)
    tensors: list[Tensor] = []
    for item in items:
        for t in list(item) if isinstance(item, (list, tuple)) else [item]:
            if not isinstance(t, Tensor):
                raise TensorError(f"{op}: takes tensors or lists of tensors (and dim=), not a {type(t).__name__}")
            tensors.append(t)
    if not tensors:
        raise TensorError(f"{op}: needs at least one tensor")
    return tensors, 0 if dim is None else dim


def _shape_args(shape: Sequence[int | Sequence[int]]) -> tuple[int, ...]:
    """Accept f(2, 3) and f((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(operator.index(s) for s in shape[0])
    return tuple(operator.index(s) for s in shape)  # type: ignore[arg-type]


def _int_pairs(op: str, pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(begin, end) or (before, after) pairs of integers: a float would be truncated inside the IR."""
    for pair in pairs:
        if not all(_is_index(v) for v in pair):
            raise TensorError(f"{op}: {pair!r} is not a pair of integers")
    return [(operator.index(a), operator.index(b)) for a, b in pairs]


def _sizes(op: str, shape: Sequence[int | Sequence[int]]) -> tuple[int, ...]:
    """The shape of a new tensor, from f(2, 3) or f((2, 3)); a size may be 0, as in numpy and PyTorch."""
    out = _shape_args(shape)
    if any(s < 0 for s in out):
        raise TensorError(f"{op}: sizes {out} must be >= 0")
    return out


_PRECISION = {dtypes.float16: 11, dtypes.bfloat16: 8, dtypes.float32: 24, dtypes.float64: 53}
"""Significant bits of each float type."""


def _float_dtype(dtype: DTypeLike | None, op: str) -> DType:
    dt = dtypes.float32 if dtype is None else to_dtype(dtype, op)
    if not dt.is_float:
        raise TensorError(f"{op}: draws floats, so it needs a float dtype, not {dt.name}; cast the result")
    return dt


def _constant(value: Scalar, dt: DType, op: str) -> Scalar:
    """`value` as a constant of `dt`, refused where `dt` cannot hold it: round_to would wrap an integer out of
    range and make a finite float beyond range inf. A float becomes an integer by truncation, as in numpy."""
    if dt.is_int and not (math.isfinite(value) and dt.min <= math.trunc(value) <= dt.max):
        raise TensorError(f"{op}: {value} does not fit {dt.name} ({dt.min} to {dt.max})")
    c = round_to(dt, value)
    if dt.is_float and math.isinf(c) and math.isfinite(value):
        raise TensorError(f"{op}: {value} is beyond the range of {dt.name}")
    return c


def _numpy_dtype(data: Any, dtype: DType | None) -> tuple[np.ndarray[Any, Any], DType]:
    """The data as a numpy array of the tensor's dtype: `dtype`, or the data's own."""
    try:
        arr = np.asarray(data)
    except ValueError as e:  # ragged nested lists
        raise TensorError(f"Tensor: cannot make a tensor from this {type(data).__name__}: {e}") from None
    if arr.dtype.kind not in "biuf":
        raise TensorError(
            f"Tensor: cannot make a tensor from {type(data).__name__} with numpy dtype {arr.dtype} "
            "(numbers beyond 64 bits, strings and mixed objects have no uopc dtype)"
        )
    dt = dtype or _natural_dtype(arr, typed=isinstance(data, (np.ndarray, Tensor)))
    return _fitted(arr, dt), dt


def _natural_dtype(arr: np.ndarray[Any, Any], typed: bool) -> DType:
    """An array's or a tensor's own dtype; for Python numbers, PyTorch's choice (float32, int32, bool),
    with int64 for integers int32 cannot hold."""
    if typed:
        try:
            return dtypes.from_numpy(str(arr.dtype))
        except ValueError:
            raise TensorError(f"Tensor: numpy dtype {arr.dtype} is not supported") from None
    return {"f": dtypes.float32, "b": dtypes.bool}.get(arr.dtype.kind) or _int_dtype(arr)


def _int_dtype(arr: np.ndarray[Any, Any]) -> DType:
    fits = arr.size == 0 or (dtypes.int32.min <= arr.min() and arr.max() <= dtypes.int32.max)
    return dtypes.int32 if fits else dtypes.int64


def _fitted(arr: np.ndarray[Any, Any], dt: DType) -> np.ndarray[Any, Any]:
    """`arr` in `dt`, refusing values `dt` cannot hold, which numpy's astype would wrap, make inf or make
    garbage: integers out of range, NaN and inf for an integer type, finite floats beyond a float type.

    A cast numpy calls safe (the same dtype, or one that holds every value of it) has nothing to refuse, and
    is not checked: a training loop makes its batches into tensors at every step, and checking a float32
    batch for overflow into float32 took longer than copying it."""
    if np.can_cast(arr.dtype, dt.np_name, "safe"):
        return arr.astype(dt.np_name, copy=False)
    if dt.is_int and arr.size:
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise TensorError(f"Tensor: NaN and inf have no {dt.name} value")
        low, high = math.trunc(arr.min().item()), math.trunc(arr.max().item())  # floats truncate, as in numpy
        if low < dt.min or high > dt.max:
            raise TensorError(
                f"Tensor: values from {low} to {high} do not fit {dt.name} ({dt.min} to {dt.max}); "
                "choose a wider dtype, or convert them with numpy first to wrap them on purpose"
            )
    with np.errstate(over="ignore"):
        out = arr.astype(dt.np_name, copy=False)
    overflow = np.isinf(out) & np.isfinite(arr) if dt.is_float else None
    if overflow is not None and overflow.any():
        raise TensorError(f"Tensor: values such as {arr[overflow].flat[0]} are beyond the range of {dt.name}")
    return out


def _empty_buffer(dtype: DType, device: str) -> UOp:
    return realizer.new_buffer(get_backend(device).runtime.allocate(dtype, 0), dtype)


def _buffer_from(data: Any, dtype: DType | None, device: str) -> UOp:
    if dtype is dtypes.bfloat16:  # numpy has no bfloat16: the data becomes float32, and a kernel rounds it
        return _buffer_from(data, dtypes.float32, device).cast(dtypes.bfloat16)
    arr, dt = _numpy_dtype(data, dtype)
    buf = realizer.new_buffer(get_backend(device).runtime.from_numpy(arr), dt)
    return buf.reshape(arr.shape) if arr.shape != (arr.size,) else buf


def _getitem(t: Tensor, index: Any) -> Tensor:
    """Integers, slices (any step), None and ... as in numpy; integer tensors, lists and arrays, and bool
    masks, as in PyTorch (see `_take`)."""
    items = [piece for item in (index if isinstance(index, tuple) else (index,)) for piece in _index_items(t, item)]
    dots = [k for k, i in enumerate(items) if i is Ellipsis]  # `is`, not ==: a tensor's == compares elements
    if len(dots) > 1:
        raise TensorError("index: at most one ...")
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if real > t.ndim:
        raise TensorIndexError(f"index: {real} indices for a tensor with {t.ndim} dimensions")
    if dots:
        items[dots[0] : dots[0] + 1] = [slice(None)] * (t.ndim - real)
    else:
        items += [slice(None)] * (t.ndim - real)
    out, axis, new_shape, picks = t, 0, [], []
    for item in items:
        if item is None:
            new_shape.append(1)
            continue
        size = t.shape[axis]
        if isinstance(item, Tensor):  # an axis kept whole for now, and picked from below
            picks.append((len(new_shape), _wrapped(item, size)))
            new_shape.append(size)
        elif isinstance(item, slice):
            if item.step == 0:
                raise TensorError(f"index: slice step cannot be zero (axis {axis})")
            out = _take_range(out, axis, *item.indices(size))
            new_shape.append(out.shape[axis])
        else:
            i = operator.index(item)
            if not -size <= i < size:
                raise TensorIndexError(f"index {i} is out of range for axis {axis} of size {size}")
            out = _take_range(out, axis, i % size, i % size + 1, 1)
        axis += 1
    out = out.reshape(tuple(new_shape)) if new_shape else out.reshape(())
    return _take(out, picks) if picks else out


def _index_items(t: Tensor, item: Any) -> list[Any]:
    """One item of an index as the items _getitem reads: integer lists and arrays become int tensors, and a
    bool mask becomes the int tensors of its true positions, one per axis it covers (the mask is computed
    now: the result's shape depends on it)."""
    if item is None or item is Ellipsis or isinstance(item, slice) or _is_index(item):
        return [item]
    if isinstance(item, (bool, np.bool_)):
        raise TensorError("index: a bool index is not supported; select with mask.where(a, b)")
    if isinstance(item, (list, np.ndarray)):
        try:
            item = Tensor(item, device=t.device)
        except TensorError as e:
            raise TensorError(f"index: a list or array index must hold integers or bools ({e})") from None
    if not isinstance(item, Tensor) or not (item.dtype.is_int or item.dtype.is_bool):
        raise TensorError(
            f"index: takes ints, slices, None, ..., and integer or bool tensors, lists or arrays, not {_describe(item)}"
        )
    if item.dtype.is_int:
        return [item]
    positions = np.nonzero(item.numpy())
    return [Tensor(p.astype(np.int64), device=t.device) for p in positions]


def _wrapped(index: Tensor, size: int) -> np.ndarray[Any, Any]:
    """The values of an index tensor for an axis of `size` (computed now, and checked), negative ones wrapped."""
    values = _check_indices("index", index, size, negative=True)
    return np.where(values < 0, values + size, values)


def _take(x: Tensor, picks: list[tuple[int, np.ndarray[Any, Any]]]) -> Tensor:
    """Index arrays applied to the axes of x they are paired with: one gather by the flat position on those
    axes (the arrays broadcast together, and are data already, so the flat positions are computed in numpy).
    As in PyTorch, the picked axes are replaced by the broadcast shape where they were, if they were next to
    each other in x, and otherwise put first. (numpy, counting integers as index arrays too, also puts them
    first in x[0, :, [1, 2]].)"""
    axes = [a for a, _ in picks]
    rest = [a for a in range(x.ndim) if a not in axes]
    sizes = tuple(x.shape[a] for a in axes)
    flat = np.ravel_multi_index(np.broadcast_arrays(*(p for _, p in picks)), sizes)
    n = prod(sizes)
    dt = dtypes.int32 if n <= dtypes.int32.max else dtypes.int64
    values = x.permute(*rest, *axes).reshape(*(x.shape[a] for a in rest), *(1,) * flat.ndim, n)
    index = Tensor(flat, dtype=dt, device=x.device).unsqueeze(-1)
    out = _pick(values, index == Tensor.arange(n, dtype=dt, device=x.device))
    if axes != list(range(axes[0], axes[0] + len(axes))):
        return out.permute(*range(len(rest), out.ndim), *range(len(rest)))
    at = axes[0]  # the number of kept axes before the picked ones
    return out.permute(*range(at), *range(len(rest), out.ndim), *range(at, len(rest)))


def _take_range(t: Tensor, axis: int, start: int, stop: int, step: int) -> Tensor:
    """Elements start, start+step, ... (before stop) of one axis, for any nonzero step."""
    idx = range(start, stop, step)
    if len(idx) == 0:
        return t.shrink([(0, 0) if i == axis else None for i in range(t.ndim)])
    lo, hi = min(idx[0], idx[-1]), max(idx[0], idx[-1]) + 1
    bounds: list[tuple[int, int] | None] = [None] * t.ndim
    bounds[axis] = (lo, hi)
    out = t.shrink(bounds)
    if step < 0:
        out = out.flip(axis)
    k = abs(step)
    if k == 1:
        return out
    n = len(idx)
    widths = [(0, n * k - out.shape[axis]) if i == axis else (0, 0) for i in range(t.ndim)]
    grouped = out.pad(widths).reshape((*out.shape[:axis], n, k, *out.shape[axis + 1 :]))
    keep: list[tuple[int, int] | None] = [None] * grouped.ndim
    keep[axis + 1] = (0, 1)
    return grouped.shrink(keep).reshape((*out.shape[:axis], n, *out.shape[axis + 1 :]))


def _describe(v: object) -> str:
    """A tensor by dtype and shape, anything else by type, for error messages."""
    return f"a {v.dtype.name} tensor of shape {v.shape}" if isinstance(v, Tensor) else f"a {type(v).__name__}"


def _tensor_arg(op: str, v: object) -> Tensor:
    """`v`, which must be a tensor: for arguments that a caller might pass as a list or a number."""
    if not isinstance(v, Tensor):
        raise TensorError(f"{op}: needs a tensor, got {_describe(v)}; make it a Tensor first")
    return v


def _scaled(x: Operand, alpha: Scalar, op: str) -> Tensor | Scalar:
    return x * alpha if isinstance(x, Tensor) else _python_scalar(x, op) * alpha


def _bounded(x: Tensor, bound: Operand, beyond: Tensor) -> Tensor:
    """`bound` where `beyond` holds, else x; a NaN bound makes NaN, as in PyTorch's clamp."""
    if isinstance(bound, Tensor):
        beyond = beyond | bound.isnan()
    elif math.isnan(_python_scalar(bound, "clip")):
        beyond = beyond | True
    return beyond.where(bound, x)


def _pick(values: Tensor, hit: Tensor) -> Tensor:
    """The element of the last axis of `values` that `hit` selects (at most one; 0 if none), in its dtype:
    a select and a sum, not a product with a one-hot, since 0 * inf is NaN. A selected -0.0 comes out +0.0,
    the sum's starting value."""
    return hit.where(values, 0).sum(-1).cast(values.dtype)


def _check_indices(op: str, index: Tensor, n: int, negative: bool) -> np.ndarray[Any, Any]:
    """The values of an index tensor (computed now, if lazy), each checked to be in [0, n), or in [-n, n)
    where negative indices count from the end."""
    values = index.numpy()
    _check_index_values(op, values, n, negative)
    return values


def _check_index_tensor(index: Tensor, check: Callable[[np.ndarray[Any, Any]], None]) -> None:
    """Run `check` on the values of an index tensor (computed now, if lazy). While a captured step is
    recorded, the check is kept with the buffer it read, and every replay runs it on that argument's new
    values: a bad index fails at the call that passes it, as it does without capture."""
    check(index._host_values())
    if realizer.recording is not None:
        node = buffer_node(realizer.computed.get(index.uop, index.uop))
        assert node is not None, "a realized tensor is a buffer"
        realizer.recording.checks.append((node, check))


def _check_targets(op: str, n: int, ignore_index: int, values: np.ndarray[Any, Any]) -> None:
    _check_index_values(op, values[values != ignore_index], n)


def _check_index_values(op: str, values: np.ndarray[Any, Any], n: int, negative: bool = False) -> None:
    low = -n if negative else 0
    if values.size and (values.min() < low or values.max() >= n):
        raise TensorIndexError(
            f"{op}: indices must lie in [{low}, {n}), got values from {values.min()} to {values.max()}"
        )


def _comes_before(a: Tensor, b: Tensor, descending: bool) -> Tensor:
    """Whether a sorts before b, NaN counting as larger than every number: last ascending, first descending."""
    if descending:
        a, b = b, a
    return (a < b) | (b.isnan() & ~a.isnan())


def _same_key(a: Tensor, b: Tensor) -> Tensor:
    return (a == b) | (a.isnan() & b.isnan())


def _reduced(losses: Tensor, reduction: str, kept: Tensor | None, op: str) -> Tensor:
    """Per-element losses reduced as PyTorch's `reduction` says; a mean counts only the `kept` elements."""
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.mean() if kept is None else losses.sum() / kept.sum()
    raise TensorError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


_ERF_SPLIT = 2.0
_ERF_SERIES = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(30)]
"""The Taylor coefficients of erf(x) / (2/sqrt(pi) x) in x^2; 30 terms reach 1e-16 below |x| = 2."""
_ERFC_FRACTION_DEPTH = 40
"""Levels of Laplace's continued fraction; 40 reach 1e-16 above |x| = 2."""


def _erf_parts(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Where |x| < 2; erf(x) there, by its Taylor series; erfc(|x|) elsewhere, by the continued fraction.

    Each part is computed from inputs clamped into its own range, so neither overflows, and neither sends
    a NaN back through the gradient of the branch that `where` did not choose."""
    small = x.abs() < _ERF_SPLIT
    xs = small.where(x, 0.0)
    x2 = xs * xs
    series = x2 * _ERF_SERIES[-1] + _ERF_SERIES[-2]
    for c in reversed(_ERF_SERIES[:-2]):
        series = series * x2 + c
    z = small.where(_ERF_SPLIT, x.abs().minimum(30.0))  # erfc(30) is e^-900: 0 in every float type
    fraction = z
    for k in range(_ERFC_FRACTION_DEPTH, 0, -1):
        fraction = z + (k / 2) / fraction
    return small, (2 / math.sqrt(math.pi)) * xs * series, (-z * z).exp() / (math.sqrt(math.pi) * fraction)


def _erfc(x: Tensor) -> Tensor:
    """1 - erf(x), without the cancellation of computing it so for large x."""
    small, erf, erfc = _erf_parts(x)
    return small.where(1.0 - erf, (x < 0).where(2.0 - erfc, erfc))


def _softplus(z: Tensor) -> Tensor:
    """log(1 + e^z) for any z: max(z, 0) + log1p(e^-|z|), where nothing overflows."""
    return z.maximum(0.0) + _log1p((-z.abs()).exp())


def _log1p(e: Tensor) -> Tensor:
    """log(1 + e) for e >= 0 with the digits of a small e, which log(1 + e) loses when 1 + e rounds: Kahan's
    log(u) e / (u - 1) with u = 1 + e, and e itself where u rounds to 1 (where the other branch sees u = 2,
    so that its gradient is not 0/0)."""
    u = 1.0 + e
    rounded = u == 1.0
    safe = rounded.where(2.0, u)
    return rounded.where(e, safe.log() * e / (safe - 1.0))


def _pair(op: str, name: str, v: int | tuple[int, int]) -> tuple[int, int]:
    """An int or a pair of ints (height, width), each at least 1."""
    pair = (v, v) if _is_index(v) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(pair) != 2 or not all(_is_index(p) and p >= 1 for p in pair):
        raise TensorError(f"{op}: {name} must be a positive integer or a pair of them, got {v!r}")
    return operator.index(pair[0]), operator.index(pair[1])


def _padding_pair(op: str, v: int | tuple[int, int]) -> tuple[int, int]:
    pair = (v, v) if _is_index(v) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(pair) != 2 or not all(_is_index(p) and p >= 0 for p in pair):
        raise TensorError(f"{op}: padding must be an integer >= 0 or a pair of them, got {v!r}")
    return operator.index(pair[0]), operator.index(pair[1])


def _conv_padding(
    padding: int | tuple[int, int] | str, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]
) -> list[tuple[int, int]]:
    """(before, after) for each axis of a batch of images: a number per side, "valid" (none) or "same"
    (an output as large as the input: the odd element of an even total goes after, as in PyTorch)."""
    if padding == "same":
        if stride != (1, 1):
            raise TensorError("conv2d: padding='same' needs stride 1")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return [(0, 0), (0, 0), *((t // 2, t - t // 2) for t in totals)]
    if isinstance(padding, str) and padding != "valid":
        raise TensorError(f"conv2d: padding must be a number, a pair, 'valid' or 'same', got {padding!r}")
    ph, pw = (0, 0) if padding == "valid" else _padding_pair("conv2d", padding)  # type: ignore[arg-type]
    return [(0, 0), (0, 0), (ph, ph), (pw, pw)]


def _pool_padding(op: str, padding: int | tuple[int, int], kernel: tuple[int, int]) -> list[tuple[int, int]]:
    ph, pw = _padding_pair(op, padding)
    if ph > kernel[0] // 2 or pw > kernel[1] // 2:
        raise TensorError(f"{op}: padding {(ph, pw)} must be at most half the kernel {kernel}")
    return [(0, 0), (0, 0), (ph, ph), (pw, pw)]


def _windows(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...], op: str) -> Tensor:
    """Every window of the last len(kernel) axes of x, as a view of shape (..., out_1, out_2, k_1, k_2):
    element [..., i, j, a, b] is x[..., i * s_1 + a * d_1, j * s_2 + b * d_2]. Movement ops only: no data
    is copied, each element of a kernel that reads the view loads from x directly."""
    lead, n = x.ndim - len(kernel), len(kernel)
    for k, d, size in zip(kernel, dilation, x.shape[lead:], strict=True):
        if size < d * (k - 1) + 1:
            raise TensorError(f"{op}: a window of {k} (dilation {d}) does not fit an axis of {size} in {x.shape}")
    for k, s, d in zip(kernel, stride, dilation, strict=True):  # each turn takes the first spatial axis
        x = x.permute(*range(lead), *range(lead + 1, x.ndim), lead)
        x = _windows_of_last_axis(x, k, s, d)
    return x.permute(*range(lead), *range(lead, lead + 2 * n, 2), *range(lead + 1, lead + 2 * n, 2))


def _windows_of_last_axis(x: Tensor, k: int, s: int, d: int) -> Tensor:
    """The last axis (length i) as (windows, k). Windows that do not overlap are a reshape into rows of s,
    cut to k. Overlapping ones take a trick: tile the axis e times and read the tiles as rows of i + d,
    so row a starts at a * (i + d) = a * d (mod i); column i * s of row a is then x[i * s + a * d]."""
    i, lead = x.shape[-1], x.shape[:-1]
    out = (i - d * (k - 1) - 1) // s + 1
    keep = [(0, 0)] * len(lead)
    if d == 1 and k <= s:
        rows = x.pad([*keep, (0, out * s - i)]).reshape(*lead, out, s)
        return rows.shrink([None] * len(lead) + [None, (0, k)])
    tiles = -(-k * (i + d) // i)
    x = x.unsqueeze(-2).expand(*lead, tiles, i).reshape(*lead, tiles * i)
    x = x.shrink([None] * len(lead) + [(0, k * (i + d))]).reshape(*lead, k, i + d)
    x = x.pad([*keep, (0, 0), (0, out * s - (i + d))]).reshape(*lead, k, out, s)
    return x.shrink([None] * (len(lead) + 2) + [(0, 1)]).reshape(*lead, k, out).transpose(-1, -2)


def _im2col(x: Tensor, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]) -> Tensor:
    """The windows of images x (N, C, H, W) copied into one buffer (C, kH kW, N, H_out, W_out): row (c, a, b)
    holds, for every image and output position, the pixel under the window's element (a, b). It is kH kW
    strided slices stacked, so its gradient adds kH kW shifted slices of the rows: an elementwise kernel."""
    sizes = x.shape[2:]
    for k, d, size in zip(kernel, dilation, sizes, strict=True):
        if size < d * (k - 1) + 1:
            raise TensorError(f"conv2d: a window of {k} (dilation {d}) does not fit an axis of {size} in {x.shape}")
    oh, ow = ((size - d * (k - 1) - 1) // s + 1 for k, s, d, size in zip(kernel, stride, dilation, sizes, strict=True))
    slices = [
        _every(_every(x, 2, a * dilation[0], oh, stride[0]), 3, b * dilation[1], ow, stride[1])
        for a in range(kernel[0])
        for b in range(kernel[1])
    ]
    return Tensor.stack(slices, dim=2).permute(1, 2, 0, 3, 4).contiguous()


def _every(x: Tensor, axis: int, start: int, count: int, step: int) -> Tensor:
    """x[..., start : start + count * step : step, ...] along `axis`, from movement ops: rows of `step` from
    the one holding `start`, of which one column is kept. The rows are cut from x where they fit in it,
    padded only past its end: a pad makes every load of the view a guarded one."""
    first = start - start % step
    end = min(first + count * step, x.shape[axis])
    x = x.shrink([(first, end) if i == axis else None for i in range(x.ndim)])
    if end < first + count * step:
        x = x.pad([(0, first + count * step - end) if i == axis else (0, 0) for i in range(x.ndim)])
    if step == 1:
        return x
    x = x.reshape(*x.shape[:axis], count, step, *x.shape[axis + 1 :])
    column = start % step
    return x.shrink([(column, column + 1) if i == axis + 1 else None for i in range(x.ndim)]).squeeze(axis + 1)
