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
from typing import Any, ClassVar, TypeAlias, TypeGuard, cast

import numpy as np

from uopc.ir import DType, OpMixin, Ops, UOp, dtypes, operand_kinds, prod, promote, round_to
from uopc.lower import get_backend
from uopc.tensor.autodiff import compute_gradients
from uopc.tensor.errors import TensorError, TensorIndexError
from uopc.tensor.realize import realize, realizer

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


class Tensor(OpMixin["Scalar | np.generic[Any]"]):
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
            for t, buf in zip(group, realize([t.uop for t in group], device), strict=True):
                value = buf if t.shape == buf.shape else buf.reshape(t.shape)
                if t.requires_grad:  # keep the graph, so that backward() still reaches the leaves through it
                    realizer.computed[t.uop] = value
                else:
                    t.uop = value
        return self

    def numpy(self) -> np.ndarray[Any, Any]:
        """The value as a numpy array (a copy). numpy has no bfloat16: bfloat16 comes out as float32 (exact)."""
        if self.dtype is dtypes.bfloat16:
            return self.cast(dtypes.float32).numpy()
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
        in_graph = set(self.uop.toposort())
        leaves = [t for t in realizer.leaves.values() if t.requires_grad and t.uop in in_graph]
        grads = compute_gradients(self.uop, [t.uop for t in leaves])
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
        division of integers gives floats, and a power of integers stays integer."""
        if not operands:
            return self._unary(op)
        (x,) = operands
        x = x.item() if isinstance(x, np.generic) else x
        if op is Ops.POW:
            return self._power(x, reverse)
        base = self._float_pair(x) if op is Ops.DIV else self
        return base._binary(op, x, "gt" if op is Ops.CMPLT and reverse else _OP_NAMES[op], reverse)

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

    def gelu(self) -> Tensor:
        """GELU with the tanh approximation (PyTorch's approximate='tanh').

        0.5 x (1 + tanh z) is written x sigmoid(2z), which does not cancel for negative x. z comes from x
        clamped to [-30, 30]: beyond it sigmoid(2z) is exactly 0 or 1 even in float64, and the clamp keeps
        x^3 and its derivative finite."""
        x, out = self._float_math()
        xc = x.maximum(-30.0).minimum(30.0)
        z = math.sqrt(2.0 / math.pi) * (xc + 0.044715 * xc * xc * xc)
        return (x * (2.0 * z).sigmoid()).cast(out)

    def silu(self) -> Tensor:
        x, out = self._float_math()
        return (x * x.sigmoid()).cast(out)

    # ---- reductions ----
    def _reduce(self, op: Ops, axis: AxisArg, keepdim: bool, name: str) -> Tensor:
        axes = _axes(axis, self.shape, name)
        x = self.cast(_sum_dtype(self.dtype)) if op is Ops.ADD else self
        if not axes:
            return x
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
        m = self.max(axis, keepdim=True).detach()
        if self.dtype.is_float:  # an infinite max would give inf - inf = NaN: shift by 0 instead, as PyTorch
            m = (m.abs() == math.inf).where(0.0, m)  # does; the sum is then 0 or inf, its log -inf or inf
        out = (self - m).exp().sum(axis, keepdim=True).log() + m
        return out if keepdim else out.reshape(self._reduced_shape(_axes(axis, self.shape, "logsumexp")))

    def softmax(self, axis: int = -1) -> Tensor:
        e = (self - self.max(axis, keepdim=True).detach()).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """(x - max) - log(sum(exp(x - max))), shifted by the maximum as softmax is (not by logsumexp's, which is 0
        for an infinite maximum), so it is NaN exactly where softmax is, as in PyTorch; x - logsumexp(x) would
        cancel at large |x|, losing the log."""
        shifted = self - self.max(axis, keepdim=True).detach()
        return shifted - shifted.exp().sum(axis, keepdim=True).log()

    def one_hot(self, num_classes: int) -> Tensor:
        """A new last axis of length num_classes, 1 at each label and 0 elsewhere (int32)."""
        if not self.dtype.is_int:
            raise TensorError(f"one_hot needs integer labels, got {self.dtype.name}")
        if not _is_index(num_classes) or num_classes < 1:
            raise TensorError(f"one_hot: num_classes must be a positive integer, got {num_classes!r}")
        labels = self.realize().numpy()  # labels are data: a bad one would silently be an all-zero row
        if labels.min() < 0 or labels.max() >= num_classes:
            raise TensorError(
                f"one_hot({num_classes}): indices must lie in [0, {num_classes}), "
                f"got values from {labels.min()} to {labels.max()}"
            )
        classes = Tensor.arange(num_classes, device=self.device)
        return (self.unsqueeze(-1) == classes).cast(dtypes.int32)

    def cross_entropy(self, labels: Tensor) -> Tensor:
        """Mean cross-entropy of these logits (..., classes) against integer class labels (...)."""
        if not isinstance(labels, Tensor):
            raise TensorError(f"cross_entropy: labels must be a tensor, got a {type(labels).__name__}")
        if not labels.dtype.is_int:
            raise TensorError(f"cross_entropy: labels must be integer class indices, got {labels.dtype.name}")
        if labels.shape != self.shape[:-1]:
            raise TensorError(
                f"cross_entropy: logits {self.shape} need labels of shape {self.shape[:-1]}, got {labels.shape}"
            )
        # select, not multiply by the one-hot: a class masked out by a -inf logit has log-probability -inf,
        # and -inf * 0 is NaN
        picked = labels.one_hot(self.shape[-1]).cast(dtypes.bool).where(self.log_softmax(-1), 0.0)
        return -picked.sum(-1).mean()

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
        if prod(new) != self.numel() or any(s < 1 for s in new):
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
        if any(s == -1 for s in new[:lead]) or any(s < 1 and s != -1 for s in new):
            raise TensorError(f"expand: sizes {new} must be >= 1, or -1 to keep an existing axis of {self.shape}")
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
        if any(not 0 <= b < e <= s for (b, e), s in zip(arg, self.shape, strict=True)):
            raise TensorError(f"shrink: bounds {arg} do not fit {self.shape}")
        return self._derive(self.uop.shrink(arg), self)

    def pad(self, padding: Sequence[tuple[int, int]], value: Scalar = 0.0) -> Tensor:
        """Pad each axis by (before, after) elements of `value`; negative widths cut elements off instead."""
        if len(padding) != self.ndim:
            raise TensorError(f"pad: {len(padding)} (before, after) pairs for a tensor with {self.ndim} dimensions")
        padding = _int_pairs("pad", padding)
        cut = [(max(0, -b), s - max(0, -a)) for (b, a), s in zip(padding, self.shape, strict=True)]
        if any(b >= e for b, e in cut):
            raise TensorError(f"pad: widths {list(padding)} remove every element of {self.shape}")
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
    Ops.IDIV: "floordiv (integers only)",
    Ops.MOD: "mod (integers only)",
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
    """The shape of a new tensor, from f(2, 3) or f((2, 3)); every size at least 1."""
    out = _shape_args(shape)
    if any(s < 1 for s in out):
        raise TensorError(f"{op}: sizes {out} must be >= 1 (zero-size tensors are not supported)")
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
    if arr.size == 0:
        raise TensorError(f"Tensor: zero-size tensors (shape {arr.shape}) are not supported")
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
    fits = dtypes.int32.min <= arr.min() and arr.max() <= dtypes.int32.max
    return dtypes.int32 if fits else dtypes.int64


def _fitted(arr: np.ndarray[Any, Any], dt: DType) -> np.ndarray[Any, Any]:
    """`arr` in `dt`, refusing values `dt` cannot hold, which numpy's astype would wrap, make inf or make
    garbage: integers out of range, NaN and inf for an integer type, finite floats beyond a float type."""
    if dt.is_int:
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


def _buffer_from(data: Any, dtype: DType | None, device: str) -> UOp:
    if dtype is dtypes.bfloat16:  # numpy has no bfloat16: the data becomes float32, and a kernel rounds it
        return _buffer_from(data, dtypes.float32, device).cast(dtypes.bfloat16)
    arr, dt = _numpy_dtype(data, dtype)
    buf = realizer.new_buffer(get_backend(device).runtime.from_numpy(arr), dt)
    return buf.reshape(arr.shape) if arr.shape != (arr.size,) else buf


def _getitem(t: Tensor, index: Any) -> Tensor:
    """Integers, slices (any step), None and ... as in numpy."""
    items = list(index) if isinstance(index, tuple) else [index]
    for item in items:
        _check_index_kind(item)
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
    out, axis, new_shape = t, 0, []
    for item in items:
        if item is None:
            new_shape.append(1)
            continue
        size = t.shape[axis]
        if isinstance(item, slice):
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
    return out.reshape(tuple(new_shape)) if new_shape else out.reshape(())


def _check_index_kind(item: object) -> None:
    """Refuse, by name, the numpy index kinds that are not implemented: masks and integer arrays."""
    if item is None or item is Ellipsis or isinstance(item, slice) or _is_index(item):
        return
    if isinstance(item, (bool, np.bool_)):
        raise TensorError("index: a bool index (a mask) is not supported; select with mask.where(a, b)")
    what = "tensor" if isinstance(item, Tensor) else type(item).__name__
    raise TensorError(
        f"index: {what} indices (gathers) are not supported; use ints, slices, None and ..., or one_hot for a gather"
    )


def _take_range(t: Tensor, axis: int, start: int, stop: int, step: int) -> Tensor:
    """Elements start, start+step, ... (before stop) of one axis, for any nonzero step."""
    idx = range(start, stop, step)
    if len(idx) == 0:
        raise TensorError(f"index: the slice selects no elements of axis {axis} (zero-size tensors are not supported)")
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
