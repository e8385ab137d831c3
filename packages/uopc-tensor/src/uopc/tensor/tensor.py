"""Tensor: a lazy, numpy-style array whose operations build a UOp graph, compiled when a value is needed.

Every operation returns at once with a new Tensor whose `uop` is a bigger graph. Nothing is computed until
`numpy()`, `item()` or `realize()` asks for a value: then the graph is cut into kernels, compiled (once per
graph structure) and run, and the tensor's `uop` becomes a BUFFER holding the result.
"""

from __future__ import annotations

import builtins
import contextlib
import math
import os
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, TypeAlias

import numpy as np

from uopc.ir import DType, Ops, UOp, dtypes, promote, round_to
from uopc.ir.uop import prod
from uopc.lower import get_backend
from uopc.tensor.autodiff import compute_gradients
from uopc.tensor.realize import BUFFERS, COMPUTED, new_buffer, realize

Scalar: TypeAlias = bool | int | float
Operand: TypeAlias = "Tensor | Scalar | np.generic[Any]"
AxisArg: TypeAlias = int | Sequence[int] | None


class TensorError(ValueError):
    """A tensor operation called with arguments it cannot take: names the op, shapes and dtypes."""


def _default_device() -> str:
    return os.environ.get("DEVICE", "C").upper()


# --8<-- [start:broadcast-shape]
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


# --8<-- [end:broadcast-shape]


def _axes(axis: AxisArg, shape: tuple[int, ...], op: str) -> tuple[int, ...]:
    """Axes of a tensor of `shape` as non-negative ints; None means all of them."""
    ndim = len(shape)
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in items:
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise TensorError(f"{op}: axis {a} is out of range for a tensor of shape {shape} ({ndim} dimensions)")
        if ndim:  # a 0-d tensor accepts axis 0 or -1, as in PyTorch, and has no axis to act on
            out.append(a % ndim)
    if len(set(out)) != len(out):
        raise TensorError(f"{op}: axes {items} repeat an axis of a tensor of shape {shape} ({ndim} dimensions)")
    return tuple(out)


# --8<-- [start:tensor-init]
class Tensor:
    """A lazy n-dimensional array. Build one from a numpy array, a nested list or a Python scalar."""

    __slots__ = ("__weakref__", "device", "grad", "requires_grad", "uop")

    _rng: ClassVar[np.random.Generator] = np.random.default_rng()
    _grad_enabled: ClassVar[bool] = True
    _leaves: ClassVar[weakref.WeakSet[Tensor]] = weakref.WeakSet()

    def __init__(
        self,
        data: Any,
        dtype: DType | None = None,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> None:
        self.device = device.upper() if device else _default_device()
        self.grad: Tensor | None = None
        self.uop: UOp = data if isinstance(data, UOp) else _buffer_from(data, dtype, self.device)
        if isinstance(data, UOp) and dtype is not None and data.dtype is not dtype:
            self.uop = data.cast(dtype)
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_()

    # --8<-- [end:tensor-init]

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

    def __len__(self) -> int:
        if not self.shape:
            raise TensorError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"<Tensor shape={self.shape} dtype={self.dtype.name} device={self.device}{grad}>"

    __hash__ = object.__hash__

    # --8<-- [start:derive]
    def requires_grad_(self, value: bool = True) -> Tensor:
        """Mark this tensor as a leaf whose gradient `backward()` computes (it is realized first)."""
        if value and not self.dtype.is_float:
            raise TensorError(f"requires_grad needs a float tensor, this one is {self.dtype.name}")
        if value:
            self.realize()
        self.requires_grad = value
        if value:
            Tensor._leaves.add(self)
        return self

    def _derive(self, uop: UOp, *sources: Tensor) -> Tensor:
        """A new tensor computed from `sources`; tracks gradients unless they are switched off."""
        tracked = uop.scalar_dtype.is_float and any(s.requires_grad for s in sources)  # no gradient for ints, bools
        if tracked and not Tensor._grad_enabled:
            uop = UOp(Ops.DETACH, uop.dtype, (uop,))
        out = Tensor(uop, device=self.device)
        out.requires_grad = tracked and Tensor._grad_enabled
        return out

    # --8<-- [end:derive]

    # --8<-- [start:tensor-realize]
    # ---- realizing ----
    def realize(self, *others: Tensor) -> Tensor:
        """Compute this tensor (and `others`, in the same plan) now; returns self."""
        todo = [t for t in (self, *others) if not is_realized(t.uop) and t.uop not in COMPUTED]
        for device in {t.device for t in todo}:
            group = [t for t in todo if t.device == device]
            for t, buf in zip(group, realize([t.uop for t in group], device), strict=True):
                value = buf if t.shape == buf.shape else buf.reshape(t.shape)
                if t.requires_grad:  # keep the graph, so that backward() still reaches the leaves through it
                    COMPUTED[t.uop] = value
                else:
                    t.uop = value
        return self

    def numpy(self) -> np.ndarray[Any, Any]:
        """The value as a numpy array (a copy). numpy has no bfloat16: bfloat16 comes out as float32 (exact)."""
        if self.dtype is dtypes.bfloat16:
            return self.cast(dtypes.float32).numpy()
        self.realize()
        backend = get_backend(self.device)
        value = COMPUTED.get(self.uop, self.uop)
        base = value if value.op is Ops.BUFFER else value.src[0]
        return np.array(backend.to_numpy(BUFFERS[base]), copy=True).reshape(self.shape)

    # --8<-- [end:tensor-realize]

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise TensorError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        value: Scalar = self.numpy().reshape(()).item()
        return value

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def contiguous(self) -> Tensor:
        """The same values, computed once into a buffer of their own; whatever uses them reads that buffer.

        The kernel that computes them may also compute other outputs of the same shape."""
        return self._derive(UOp(Ops.CONTIGUOUS, self.uop.dtype, (self.uop,)), self)

    # --8<-- [start:detach]
    def detach(self) -> Tensor:
        """The same values, with no gradient flowing back through them."""
        return Tensor(UOp(Ops.DETACH, self.uop.dtype, (self.uop,)), device=self.device)

    # --8<-- [end:detach]

    def cast(self, dtype: DType) -> Tensor:
        return self if dtype is self.dtype else self._derive(self.uop.cast(dtype), self)

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    # ---- gradients ----
    # --8<-- [start:no-grad]
    @staticmethod
    @contextlib.contextmanager
    def no_grad() -> Iterator[None]:
        """Inside `with Tensor.no_grad():`, results carry no gradient (as in evaluation or optimizer steps)."""
        before, Tensor._grad_enabled = Tensor._grad_enabled, False
        try:
            yield
        finally:
            Tensor._grad_enabled = before

    # --8<-- [end:no-grad]

    # --8<-- [start:backward]
    def backward(self) -> None:
        """Add d self / d leaf to `.grad` of every leaf with requires_grad that self depends on."""
        if self.numel() != 1:
            raise TensorError(f"backward() needs a scalar loss, this tensor has shape {self.shape}; reduce it first")
        if not self.dtype.is_float:
            raise TensorError(f"backward() needs a float loss, this one is {self.dtype.name}")
        in_graph = set(self.uop.toposort())
        leaves = [t for t in Tensor._leaves if t.requires_grad and t.uop in in_graph]
        grads = compute_gradients(self.uop, [t.uop for t in leaves])
        for t in leaves:
            if t.uop in grads:
                g = Tensor(grads[t.uop], device=t.device)
                t.grad = g if t.grad is None else t.grad + g

    # --8<-- [end:backward]

    # ---- creation ----
    # --8<-- [start:creation]
    @staticmethod
    def manual_seed(seed: int) -> None:
        """Make rand, randn and uniform (and layers initialized with them) repeat from run to run."""
        Tensor._rng = np.random.default_rng(seed)

    @staticmethod
    def full(shape: Sequence[int], value: Scalar, dtype: DType | None = None, **kw: Any) -> Tensor:
        dt = dtype or dtypes.from_python(value)
        if dt.is_int and isinstance(value, float) and not math.isfinite(value):
            raise TensorError(f"full: {value} has no {dt.name} value")
        c = UOp.const(round_to(dt, value), dt)
        shape = tuple(shape)
        if shape:
            c = c.reshape((1,) * len(shape)).expand(shape)
        return Tensor(c, **kw)

    @staticmethod
    def zeros(*shape: int | Sequence[int], dtype: DType = dtypes.float32, **kw: Any) -> Tensor:
        return Tensor.full(_shape_args(shape), 0.0 if dtype.is_float else 0, dtype, **kw)

    @staticmethod
    def ones(*shape: int | Sequence[int], dtype: DType = dtypes.float32, **kw: Any) -> Tensor:
        return Tensor.full(_shape_args(shape), 1.0 if dtype.is_float else 1, dtype, **kw)

    @staticmethod
    def arange(
        start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DType | None = None, **kw: Any
    ) -> Tensor:
        if stop is None:
            start, stop = 0, start
        dt = dtype or (dtypes.float32 if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.int32)
        return Tensor(np.arange(start, stop, step, dtype=dt.np_name), dtype=dt, **kw)

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: DType = dtypes.float32, **kw: Any) -> Tensor:
        return Tensor(np.eye(n, m, dtype=dtype.np_name), dtype=dtype, **kw)

    @staticmethod
    def rand(*shape: int | Sequence[int], dtype: DType = dtypes.float32, **kw: Any) -> Tensor:
        """Uniform in [0, 1)."""
        return Tensor(Tensor._rng.random(_shape_args(shape)).astype(dtype.np_name), dtype=dtype, **kw)

    @staticmethod
    def randn(*shape: int | Sequence[int], dtype: DType = dtypes.float32, **kw: Any) -> Tensor:
        """Standard normal."""
        return Tensor(Tensor._rng.standard_normal(_shape_args(shape)).astype(dtype.np_name), dtype=dtype, **kw)

    @staticmethod
    def uniform(
        *shape: int | Sequence[int],
        low: builtins.float = 0.0,
        high: builtins.float = 1.0,
        dtype: DType = dtypes.float32,
        **kw: Any,
    ) -> Tensor:
        data = Tensor._rng.uniform(low, high, _shape_args(shape)).astype(dtype.np_name)
        return Tensor(data, dtype=dtype, **kw)

    # --8<-- [end:creation]

    # ---- elementwise ----
    # --8<-- [start:operands]
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
            a, b = self.cast(dt).uop, UOp.const(round_to(dt, value), dt)
            sources = [self]
        return (b, a, sources) if reverse else (a, b, sources)

    def _binary(self, op: Ops, other: Operand, name: str, reverse: bool = False) -> Tensor:
        a, b, sources = self._operands(other, name, reverse)
        try:
            uop = a.alu(op, b)
        except ValueError as e:
            raise TensorError(f"{name}: {e}") from None
        return self._derive(uop, *sources)

    # --8<-- [end:operands]

    def _unary(self, op: Ops, float_only: bool = True) -> Tensor:
        x = self if not float_only or self.dtype.is_float else self.float()
        return self._derive(x.uop.alu(op), x)

    def __add__(self, x: Operand) -> Tensor:
        return self._binary(Ops.ADD, x, "add")

    def __radd__(self, x: Operand) -> Tensor:
        return self._binary(Ops.ADD, x, "add", reverse=True)

    def __sub__(self, x: Operand) -> Tensor:
        return self._binary(Ops.SUB, x, "sub")

    def __rsub__(self, x: Operand) -> Tensor:
        return self._binary(Ops.SUB, x, "sub", reverse=True)

    def __mul__(self, x: Operand) -> Tensor:
        return self._binary(Ops.MUL, x, "mul")

    def __rmul__(self, x: Operand) -> Tensor:
        return self._binary(Ops.MUL, x, "mul", reverse=True)

    def __truediv__(self, x: Operand) -> Tensor:
        return self._float_pair(x)._binary(Ops.DIV, x, "div")

    def __rtruediv__(self, x: Operand) -> Tensor:
        return self._float_pair(x)._binary(Ops.DIV, x, "div", reverse=True)

    def _float_pair(self, x: Operand) -> Tensor:
        """True division of integers gives floats."""
        if self.dtype.is_float or (isinstance(x, Tensor) and x.dtype.is_float) or isinstance(x, float):
            return self
        return self.float()

    def __floordiv__(self, x: Operand) -> Tensor:
        return self._binary(Ops.IDIV, x, "floordiv (integers only)")

    def __mod__(self, x: Operand) -> Tensor:
        return self._binary(Ops.MOD, x, "mod (integers only)")

    def __pow__(self, x: Operand) -> Tensor:
        """A whole exponent >= 0 multiplies (by squaring), so an integer tensor stays an integer tensor;
        any other exponent uses POW on floats."""
        if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
            return self._power_by_squaring(x)
        if isinstance(x, int) and not isinstance(x, bool) and not self.dtype.is_float:
            raise TensorError(f"pow: an integer tensor ({self.dtype.name}) to the negative power {x}; cast to float")
        return self._float_pair(x)._binary(Ops.POW, x, "pow")

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

    def __rpow__(self, x: Operand) -> Tensor:
        return self._float_pair(x)._binary(Ops.POW, x, "pow", reverse=True)

    def __neg__(self) -> Tensor:
        if self.dtype.is_bool:
            return self.logical_not()
        return self._derive(-self.uop, self)

    def __lt__(self, x: Operand) -> Tensor:
        return self._binary(Ops.CMPLT, x, "lt")

    def __gt__(self, x: Operand) -> Tensor:
        return self._binary(Ops.CMPLT, x, "gt", reverse=True)

    def __le__(self, x: Operand) -> Tensor:
        return (self > x).logical_not()

    def __ge__(self, x: Operand) -> Tensor:
        return (self < x).logical_not()

    def __eq__(self, x: Operand) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPEQ, x, "eq")

    def __ne__(self, x: Operand) -> Tensor:  # type: ignore[override]
        return self._binary(Ops.CMPNE, x, "ne")

    def __and__(self, x: Operand) -> Tensor:
        return self._binary(Ops.AND, x, "and")

    def __or__(self, x: Operand) -> Tensor:
        return self._binary(Ops.OR, x, "or")

    def __xor__(self, x: Operand) -> Tensor:
        return self._binary(Ops.XOR, x, "xor")

    def isnan(self) -> Tensor:
        """True where the value is NaN, the one value not equal to itself."""
        return (
            self._binary(Ops.CMPNE, self, "isnan") if self.dtype.is_float else Tensor.zeros_like(self).cast(dtypes.bool)
        )

    def logical_not(self) -> Tensor:
        return self.cast(dtypes.bool)._binary(Ops.CMPNE, True, "logical_not")

    def maximum(self, x: Operand) -> Tensor:
        return self._binary(Ops.MAX, x, "maximum")

    def minimum(self, x: Operand) -> Tensor:
        return self._binary(Ops.MIN, x, "minimum")

    def where(self, a: Operand, b: Operand) -> Tensor:
        """`a` where this (boolean) tensor is true, else `b`; all three broadcast together."""
        ref = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
        a_t, b_t = _lift(a, ref, self.device), _lift(b, ref, self.device)
        dt = promote(a_t.dtype, b_t.dtype)
        cond = self.cast(dtypes.bool)
        shape = broadcast_shape("where", cond.shape, a_t.shape, b_t.shape)
        c, x, y = (t._broadcast_to(shape) for t in (cond, a_t.cast(dt), b_t.cast(dt)))
        return self._derive(c.uop.where(x.uop, y.uop), c, x, y)

    @staticmethod
    def ones_like(t: Tensor) -> Tensor:
        return Tensor.full(t.shape, 1.0 if t.dtype.is_float else 1, t.dtype, device=t.device)

    @staticmethod
    def zeros_like(t: Tensor) -> Tensor:
        return Tensor.full(t.shape, 0.0 if t.dtype.is_float else 0, t.dtype, device=t.device)

    def abs(self) -> Tensor:
        """|x| = x * sign(x), so the gradient at 0 is sign(0) = 0, as in PyTorch."""
        return self * self.sign()

    def sign(self) -> Tensor:
        """-1, 0 or 1 in the tensor's dtype; it carries no gradient (its derivative is 0 almost everywhere)."""
        return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)

    def exp(self) -> Tensor:
        return self._unary(Ops.EXP)

    def log(self) -> Tensor:
        return self._unary(Ops.LOG)

    def sqrt(self) -> Tensor:
        return self._unary(Ops.SQRT)

    def rsqrt(self) -> Tensor:
        return 1.0 / self.sqrt()

    def sin(self) -> Tensor:
        return self._unary(Ops.SIN)

    def cos(self) -> Tensor:
        return self._unary(Ops.COS)

    def square(self) -> Tensor:
        return self * self

    # --8<-- [start:activations]
    def sigmoid(self) -> Tensor:
        return 1.0 / (1.0 + (-self.float()).exp())

    def tanh(self) -> Tensor:
        return 2.0 * (2.0 * self.float()).sigmoid() - 1.0

    def relu(self) -> Tensor:
        return (self > 0).where(self, 0.0 if self.dtype.is_float else 0)

    def gelu(self) -> Tensor:
        """GELU with the tanh approximation (PyTorch's approximate='tanh')."""
        x = self.float()
        return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)).tanh())

    def silu(self) -> Tensor:
        return self * self.sigmoid()

    # --8<-- [end:activations]

    # ---- reductions ----
    # --8<-- [start:reductions]
    def _reduce(self, op: Ops, axis: AxisArg, keepdim: bool, name: str) -> Tensor:
        axes = _axes(axis, self.shape, name)
        narrow = self.dtype.is_bool or (self.dtype.is_int and self.dtype.itemsize < 4)
        x = self.cast(dtypes.int32) if narrow and op is Ops.ADD else self  # sums of bools and int8s count up
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
        return self.float().sum(axis, keepdim) / float(self._count(axis, "mean"))

    def var(self, axis: AxisArg = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Variance with Bessel's correction by default (correction=1, as in PyTorch); 0 gives numpy's."""
        n = self._count(axis, "var")
        centered = self.float() - self.float().mean(axis, keepdim=True)
        return centered.square().sum(axis, keepdim) / float(max(n - correction, 0))

    # --8<-- [end:reductions]

    def std(self, axis: AxisArg = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(axis, keepdim, correction).sqrt()

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the first largest value along `axis` (of the flattened tensor when None), as int32."""
        return self._first_index(Ops.MAX, axis, keepdim)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the first smallest value: found with MIN, since negating wraps unsigned integers."""
        return self._first_index(Ops.MIN, axis, keepdim)

    def _first_index(self, op: Ops, axis: int | None, keepdim: bool) -> Tensor:
        if axis is None or not self.shape:
            return self.flatten()._first_index(op, 0, keepdim=False)
        (a,) = _axes(axis, self.shape, "argmax" if op is Ops.MAX else "argmin")
        n = self.shape[a]
        best = self._reduce(op, a, True, "argmax")
        hit = (self == best) | self.isnan()  # a NaN is the extreme, as in numpy
        countdown = Tensor.arange(n, 0, -1, dtype=dtypes.int32, device=self.device).reshape(
            tuple(n if i == a else 1 for i in range(self.ndim))
        )
        first = hit.where(countdown, 0).max(a, keepdim=keepdim)
        return (n - first).detach()

    # --8<-- [start:stable]
    def logsumexp(self, axis: AxisArg = -1, keepdim: bool = False) -> Tensor:
        m = self.max(axis, keepdim=True).detach()
        out = (self - m).exp().sum(axis, keepdim=True).log() + m
        return out if keepdim else out.reshape(self._reduced_shape(_axes(axis, self.shape, "logsumexp")))

    def softmax(self, axis: int = -1) -> Tensor:
        e = (self - self.max(axis, keepdim=True).detach()).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        return self - self.logsumexp(axis, keepdim=True)

    def one_hot(self, num_classes: int) -> Tensor:
        """A new last axis of length num_classes, 1 at each label and 0 elsewhere (int32)."""
        if not self.dtype.is_int:
            raise TensorError(f"one_hot needs integer labels, got {self.dtype.name}")
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
        if not labels.dtype.is_int:
            raise TensorError(f"cross_entropy: labels must be integer class indices, got {labels.dtype.name}")
        if labels.shape != self.shape[:-1]:
            raise TensorError(
                f"cross_entropy: logits {self.shape} need labels of shape {self.shape[:-1]}, got {labels.shape}"
            )
        picked = self.log_softmax(-1) * labels.one_hot(self.shape[-1]).float()
        return -picked.sum(-1).mean()

    # --8<-- [end:stable]

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
        arg = [(0, s) if b is None else b for b, s in zip(bounds, self.shape, strict=True)]
        if any(not 0 <= b < e <= s for (b, e), s in zip(arg, self.shape, strict=True)):
            raise TensorError(f"shrink: bounds {arg} do not fit {self.shape}")
        return self._derive(self.uop.shrink(arg), self)

    # --8<-- [start:pad]
    def pad(self, padding: Sequence[tuple[int, int]], value: Scalar = 0.0) -> Tensor:
        """Pad each axis by (before, after) elements of `value`; negative widths cut elements off instead."""
        if len(padding) != self.ndim:
            raise TensorError(f"pad: {len(padding)} (before, after) pairs for a tensor with {self.ndim} dimensions")
        cut = [(max(0, -b), s - max(0, -a)) for (b, a), s in zip(padding, self.shape, strict=True)]
        if any(b >= e for b, e in cut):
            raise TensorError(f"pad: widths {list(padding)} remove every element of {self.shape}")
        x = self.shrink(cut) if any(b or e != s for (b, e), s in zip(cut, self.shape, strict=True)) else self
        grow = [(max(0, b), max(0, a)) for b, a in padding]
        if all(b == a == 0 for b, a in grow):
            return x
        padded = x._derive(x.uop.pad(grow), x)
        if value == 0:
            return padded
        inside = Tensor.ones(*x.shape, dtype=dtypes.bool, device=self.device)
        mask = Tensor(inside.uop.pad(grow), device=self.device)
        return mask.where(padded, value)

    # --8<-- [end:pad]

    def flip(self, axis: AxisArg = None) -> Tensor:
        return self._derive(self.uop.flip(_axes(axis, self.shape, "flip")), self)

    def squeeze(self, dim: int | None = None) -> Tensor:
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        axes = _axes(dim, self.shape, "squeeze")
        if not axes or self.shape[axes[0]] != 1:
            return self
        return self.reshape(self._reduced_shape(axes))

    def unsqueeze(self, dim: int) -> Tensor:
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

    @staticmethod
    def cat(*items: Tensor | Sequence[Tensor], dim: int = 0) -> Tensor:
        """Join tensors along an existing axis `dim`; every other axis must match. Takes tensors or one list."""
        tensors = [t for item in items for t in ([item] if isinstance(item, Tensor) else item)]
        if not tensors:
            raise TensorError("cat: needs at least one tensor")
        first = tensors[0]
        d = _axes(dim, first.shape, "cat")[0]
        for t in tensors[1:]:
            if t.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if i != d
            ):
                raise TensorError(f"cat: shapes {[x.shape for x in tensors]} differ outside dim {d}")
        total, before, out = sum(t.shape[d] for t in tensors), 0, None
        for t in tensors:
            widths = [(before, total - before - t.shape[d]) if i == d else (0, 0) for i in range(t.ndim)]
            piece = t.pad(widths)
            out = piece if out is None else out | piece if piece.dtype.is_bool else out + piece  # bools have no +
            before += t.shape[d]
        assert out is not None
        return out

    @staticmethod
    def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        """Join equal-shaped tensors along a new axis `dim`."""
        if any(t.shape != tensors[0].shape for t in tensors):
            raise TensorError(f"stack: tensors must all have one shape, got {[t.shape for t in tensors]}")
        return Tensor.cat(*(t.unsqueeze(dim) for t in tensors), dim=dim)

    # ---- matrix products ----
    # --8<-- [start:matmul]
    def matmul(self, w: Tensor) -> Tensor:
        """Matrix product with numpy's rules: 1-D operands get an axis, leading axes broadcast."""
        if self.ndim == 0 or w.ndim == 0:
            raise TensorError(f"matmul: operands must have at least 1 dimension, got {self.shape} and {w.shape}")
        x = self.unsqueeze(0) if self.ndim == 1 else self
        y = w.unsqueeze(-1) if w.ndim == 1 else w
        if x.shape[-1] != y.shape[-2]:
            raise TensorError(
                f"matmul: inner dimensions differ: {self.shape} @ {w.shape} ({x.shape[-1]} vs {y.shape[-2]})"
            )
        out = (x.unsqueeze(-2) * y.transpose(-2, -1).unsqueeze(-3)).sum(-1)
        if self.ndim == 1:
            out = out.squeeze(-2)
        return out.squeeze(-1) if w.ndim == 1 else out

    # --8<-- [end:matmul]

    def __matmul__(self, w: Tensor) -> Tensor:
        return self.matmul(w)

    def dot(self, w: Tensor) -> Tensor:
        return self.matmul(w)


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
    """A scalar as a 0-d tensor of `like`'s dtype (a float makes an integer dtype float32)."""
    if isinstance(v, Tensor):
        return v
    value = _python_scalar(v, "where")
    dt = dtypes.from_python(value) if like is None else like.dtype
    if isinstance(value, float) and not dt.is_float:
        dt = dtypes.float32
    return Tensor.full((), value, dt, device=device)


def _shape_args(shape: Sequence[int | Sequence[int]]) -> tuple[int, ...]:
    """Accept f(2, 3) and f((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(int(s) for s in shape[0])
    return tuple(int(s) for s in shape)  # type: ignore[arg-type]


def _numpy_dtype(data: Any, dtype: DType | None) -> tuple[np.ndarray[Any, Any], DType]:
    if dtype is not None:
        return np.asarray(data, dtype=dtype.np_name), dtype
    if isinstance(data, np.ndarray):
        try:
            return data, dtypes.from_numpy(str(data.dtype))
        except ValueError:
            raise TensorError(f"Tensor: numpy dtype {data.dtype} is not supported") from None
    arr = np.asarray(data)
    if arr.dtype.kind == "f":
        return arr.astype(np.float32), dtypes.float32  # Python floats become float32, as in PyTorch
    if arr.dtype.kind in "iu":  # Python ints become int32, or int64 where int32 cannot hold them
        fits = dtypes.int32.min <= arr.min() and arr.max() <= dtypes.int32.max
        return (arr.astype(np.int32), dtypes.int32) if fits else (arr.astype(np.int64), dtypes.int64)
    if arr.dtype.kind == "b":
        return arr, dtypes.bool
    raise TensorError(f"Tensor: cannot make a tensor from {type(data).__name__} with numpy dtype {arr.dtype}")


def _buffer_from(data: Any, dtype: DType | None, device: str) -> UOp:
    if dtype is dtypes.bfloat16:  # numpy has no bfloat16: the data becomes float32, and a kernel rounds it
        return _buffer_from(data, dtypes.float32, device).cast(dtypes.bfloat16)
    arr, dt = _numpy_dtype(data, dtype)
    if arr.size == 0:
        raise TensorError(f"Tensor: zero-size tensors (shape {arr.shape}) are not supported")
    buf = new_buffer(get_backend(device).from_numpy(arr), dt)
    return buf.reshape(arr.shape) if arr.shape != (arr.size,) else buf


def _getitem(t: Tensor, index: Any) -> Tensor:
    """Integers, slices (any step), None and ... as in numpy."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise TensorError("index: at most one ...")
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if real > t.ndim:
        raise TensorError(f"index: {real} indices for a tensor with {t.ndim} dimensions")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (t.ndim - real)
    else:
        items += [slice(None)] * (t.ndim - real)
    out, axis, new_shape = t, 0, []
    for item in items:
        if item is None:
            new_shape.append(1)
            continue
        size = t.shape[axis]
        if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            i = int(item)
            if not -size <= i < size:
                raise TensorError(f"index {i} is out of range for axis {axis} of size {size}")
            out = _take_range(out, axis, i % size, i % size + 1, 1)
        elif isinstance(item, slice):
            if item.step == 0:
                raise TensorError(f"index: slice step cannot be zero (axis {axis})")
            out = _take_range(out, axis, *item.indices(size))
            new_shape.append(out.shape[axis])
        else:
            raise TensorError(f"index: {type(item).__name__} indices are not supported (use ints, slices, None, ...)")
        axis += 1
    return out.reshape(tuple(new_shape)) if new_shape else out.reshape(())


# --8<-- [start:take-range]
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


# --8<-- [end:take-range]
