"""Every elementwise op, reduction and creation function of Tensor, against numpy.

Shapes mix size-1 and distinct axis lengths, (2, 3, 5), (1, 3, 1), (4, 1, 5), so a swapped axis or a
broadcast that goes the wrong way cannot hide behind a square shape. Each test realizes all of its cases
in one plan (one compiler call), which keeps a cold-cache run short.
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c.compiler import DEFAULT_CFLAGS
from uopc.lower import PlanCache
from uopc.tensor import Tensor, dtypes, realizer

pytestmark = pytest.mark.sanitize  # rerun with kernels under ASan and UBSan (hatch env sanitize)

Array = npt.NDArray[Any]
BinaryOp = Callable[[Any, Any], Any]

SHAPE_PAIRS: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((2, 3, 5), (2, 3, 5)),
    ((2, 3, 5), (1, 3, 1)),
    ((4, 1, 5), (1, 3, 1)),  # both sides grow: (4, 3, 5)
    ((4, 1, 5), (3, 1)),  # fewer dimensions on the right
    ((5,), (2, 3, 5)),
    ((), (2, 3, 5)),  # a 0-d tensor
]
SHAPES: list[tuple[int, ...]] = [(2, 3, 5), (1, 3, 1), (4, 1, 5)]


def floats(shape: tuple[int, ...], seed: int, low: float = -2.0, high: float = 2.0) -> Array:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def halves(shape: tuple[int, ...], seed: int) -> Array:
    """Multiples of 0.5 in [-2, 2]: exact in float32, and with many ties, so == and <= are really tested."""
    return (np.random.default_rng(seed).integers(-4, 5, shape) / 2).astype(np.float32)


def ints(shape: tuple[int, ...], seed: int, low: int = -6, high: int = 7) -> Array:
    return np.random.default_rng(seed).integers(low, high, shape).astype(np.int32)


def check(t: Tensor, ref: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same shape, same kind of dtype, and close values."""
    want = np.asarray(ref)
    got = t.numpy()
    assert got.shape == want.shape, f"shape {got.shape}, numpy says {want.shape}"
    assert got.dtype.kind == want.dtype.kind, f"dtype {got.dtype}, numpy says {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def realize_all(*tensors: Tensor) -> None:
    Tensor.realize(*tensors)


# ---- binary operators, broadcasting, scalars on either side ----

ARITHMETIC: dict[str, BinaryOp] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
}
COMPARISONS: dict[str, BinaryOp] = {
    "lt": operator.lt,
    "gt": operator.gt,
    "le": operator.le,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_arithmetic_broadcasts_like_numpy(name: str) -> None:
    op = ARITHMETIC[name]
    cases = []
    for k, (sa, sb) in enumerate(SHAPE_PAIRS):
        a = floats(sa, k)
        b = floats(sb, 100 + k, 0.5, 2.0) * np.where(ints(sb, 200 + k, 0, 2) == 0, -1, 1).astype(np.float32)
        cases += [(op(Tensor(a), Tensor(b)), op(a, b)), (op(Tensor(b), Tensor(a)), op(b, a))]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, ref)


@pytest.mark.parametrize("name", list(COMPARISONS))
def test_comparisons_broadcast_like_numpy(name: str) -> None:
    op = COMPARISONS[name]
    cases = []
    for k, (sa, sb) in enumerate(SHAPE_PAIRS):
        a, b = halves(sa, k), halves(sb, 50 + k)
        cases += [(op(Tensor(a), Tensor(b)), op(a, b)), (op(Tensor(b), Tensor(a)), op(b, a))]
        ia, ib = ints(sa, k, -2, 3), ints(sb, 50 + k, -2, 3)
        cases.append((op(Tensor(ia), Tensor(ib)), op(ia, ib)))
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype is dtypes.bool
        check(t, ref)


def test_python_scalars_on_either_side() -> None:
    a = floats((2, 3, 5), 1)
    x = Tensor(a)
    cases: list[tuple[Tensor, Array]] = [
        (x + 2.5, a + np.float32(2.5)),
        (2.5 + x, np.float32(2.5) + a),
        (x - 1, a - np.float32(1)),
        (3 - x, np.float32(3) - a),
        (x * -1.5, a * np.float32(-1.5)),
        (0.5 * x, np.float32(0.5) * a),
        (x / 4, a / np.float32(4)),
        (1.0 / (x + 3.0), np.float32(1) / (a + np.float32(3))),
        (x < 0.25, a < np.float32(0.25)),
        (0.25 < x, np.float32(0.25) < a),  # noqa: SIM300 (a scalar on the left is the point)
        (x >= 0, a >= 0),
        (x == 0.5, a == np.float32(0.5)),
        (x.maximum(0.1), np.maximum(a, np.float32(0.1))),
        (x.minimum(-0.1), np.minimum(a, np.float32(-0.1))),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, ref)


def test_python_float_promotes_int_tensors() -> None:
    """An int tensor meeting a Python float computes in float32 (as in PyTorch), not in int32."""
    i = ints((2, 3, 5), 2)
    x = Tensor(i)
    assert x.dtype is dtypes.int32
    cases = [
        (x + 0.5, i + np.float32(0.5)),
        (1.5 - x, np.float32(1.5) - i),
        (x * 0.25, i * np.float32(0.25)),
        (x / 2, i / np.float32(2)),  # true division of ints gives floats
        (x / x.maximum(1), i / np.maximum(i, 1)),
        (x < 0.5, i < 0.5),
        (x.maximum(0.5), np.maximum(i, np.float32(0.5))),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype in (dtypes.float32, dtypes.bool), t.dtype
        check(t, np.asarray(ref).astype(np.float32) if np.asarray(ref).dtype.kind == "f" else ref)
    kept = x * 2 + 1  # an int scalar keeps the int dtype
    assert kept.dtype is dtypes.int32
    check(kept, i * 2 + 1)


def test_integer_arithmetic_floors_like_numpy() -> None:
    a, b = ints((2, 3, 5), 3, -9, 10), ints((1, 3, 1), 4, 1, 4) * np.array([[[-1], [1], [-1]]], np.int32)
    x, y = Tensor(a), Tensor(b)
    cases = [
        (x + y, a + b),
        (x - y, a - b),
        (x * y, a * b),
        (x // y, a // b),
        (x % y, a % b),
        (-x, -a),
        (x.maximum(y), np.maximum(a, b)),
        (x.minimum(y), np.minimum(a, b)),
        (x & 6, a & 6),
        (x | y, a | b),
        (x ^ y, a ^ b),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype is dtypes.int32
        check(t, ref, rtol=0, atol=0)


def test_bool_logic() -> None:
    a, b = ints((2, 3, 5), 5, 0, 2).astype(bool), ints((1, 3, 1), 6, 0, 2).astype(bool)
    x, y = Tensor(a), Tensor(b)
    cases = [(x & y, a & b), (x | y, a | b), (x ^ y, a ^ b), (x.logical_not(), ~a), (-x, ~a), (x == y, a == b)]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype is dtypes.bool
        check(t, ref)


def test_bool_add_and_mul_are_or_and_and_as_in_numpy() -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    x, y = Tensor(a), Tensor(b)
    cases = [(x + y, a + b), (x * y, a * b), (x + True, a + True), (False * x, False * a)]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype is dtypes.bool
        np.testing.assert_array_equal(t.numpy(), ref)


def test_where_with_a_bool_branch_and_an_int_keeps_the_int() -> None:
    """A Python int beside a bool tensor makes the default integer, as in `mask + 5`; it must not
    become True (where(c, bool_tensor, 5) used to give True for 5)."""
    cond, picked = Tensor([True, False, False]), Tensor([False, True, True])
    for t, ref in [(cond.where(picked, 5), [0, 5, 5]), (cond.where(-3, picked), [-3, 1, 1])]:
        assert t.dtype is dtypes.int32
        np.testing.assert_array_equal(t.numpy(), ref)


def test_abs_of_negative_zero_is_positive_zero() -> None:
    a = np.array([-0.0, 0.0, -1.5, np.inf, -np.inf, np.nan], np.float32)
    got = Tensor(a).abs().numpy()
    np.testing.assert_array_equal(got, np.abs(a))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.abs(a)))  # -0.0 == 0.0: the sign bit tells


def test_pow() -> None:
    base = floats((2, 3, 5), 7, 0.5, 2.0)
    expo = floats((1, 3, 1), 8, -1.5, 1.5)
    x, e = Tensor(base), Tensor(expo)
    cases = [
        (x**e, base**expo),
        (x**2.5, base ** np.float32(2.5)),
        (x**3, base**3),
        (x**0, np.ones_like(base)),
        (x**-1, 1 / base),
        (2.0**e, np.float32(2.0) ** expo),
        (Tensor(ints((2, 3, 5), 9, 1, 4)) ** 0.5, np.sqrt(ints((2, 3, 5), 9, 1, 4).astype(np.float32))),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, np.asarray(ref, dtype=np.float32), rtol=2e-5)


def test_where_broadcasts_all_three_operands() -> None:
    cond = ints((4, 1, 5), 10, 0, 2).astype(bool)
    a, b = floats((1, 3, 1), 11), floats((3, 5), 12)
    c, x, y = Tensor(cond), Tensor(a), Tensor(b)
    cases = [
        (c.where(x, y), np.where(cond, a, b)),
        (c.where(x, 0.5), np.where(cond, a, np.float32(0.5))),
        (c.where(-1.0, y), np.where(cond, np.float32(-1), b)),
        (c.where(1, 0), np.where(cond, 1, 0).astype(np.int32)),
        (Tensor(ints((3, 5), 13)).where(x, y), np.where(ints((3, 5), 13) != 0, a, b)),  # nonzero is true
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, ref)


# ---- unary functions ----


def gelu_erf(x: Array) -> Array:
    """Exact GELU, x P(X <= x) for a standard normal X, with the C library's erf."""
    return np.asarray(0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))


def gelu_tanh(x: Array) -> Array:
    """The tanh approximation of GELU, written out."""
    return np.asarray(0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))))


def sigmoid(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


UNARY: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Array], Array], tuple[float, float]]] = {
    "neg": (lambda t: -t, lambda a: -a, (-3, 3)),
    "abs": (Tensor.abs, np.abs, (-3, 3)),
    "exp": (Tensor.exp, np.exp, (-4, 4)),
    "log": (Tensor.log, np.log, (0.05, 5)),
    "sqrt": (Tensor.sqrt, np.sqrt, (0.0, 5)),
    "rsqrt": (Tensor.rsqrt, lambda a: 1 / np.sqrt(a), (0.05, 5)),
    "sin": (Tensor.sin, np.sin, (-7, 7)),
    "cos": (Tensor.cos, np.cos, (-7, 7)),
    "sigmoid": (Tensor.sigmoid, sigmoid, (-8, 8)),
    "tanh": (Tensor.tanh, np.tanh, (-4, 4)),
    "relu": (Tensor.relu, lambda a: np.maximum(a, 0), (-3, 3)),
    "gelu": (Tensor.gelu, gelu_erf, (-4, 4)),
    "gelu_tanh": (lambda t: t.gelu("tanh"), gelu_tanh, (-4, 4)),
    "silu": (Tensor.silu, lambda a: a * sigmoid(a), (-5, 5)),
    "square": (Tensor.square, np.square, (-3, 3)),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_functions(name: str) -> None:
    f, ref_f, (low, high) = UNARY[name]
    cases = [
        (f(Tensor(a)), ref_f(a.astype(np.float64))) for k, s in enumerate(SHAPES) for a in [floats(s, k, low, high)]
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype is dtypes.float32
        check(t, ref.astype(np.float32), rtol=2e-5, atol=2e-6)


def test_unary_functions_of_integers_compute_in_float() -> None:
    i = ints((2, 3, 5), 14, 1, 5)
    x = Tensor(i)
    f = i.astype(np.float64)
    cases = [
        (x.exp(), np.exp(f)),
        (x.log(), np.log(f)),
        (x.sqrt(), np.sqrt(f)),
        (x.sigmoid(), sigmoid(f)),
        (x.sin(), np.sin(f)),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, ref.astype(np.float32), rtol=2e-5)
    ab, rl, sq = x.abs(), (x - 3).relu(), x.square()
    realize_all(ab, rl, sq)
    assert ab.dtype is rl.dtype is sq.dtype is dtypes.int32
    check(ab, np.abs(i), 0, 0)
    check(rl, np.maximum(i - 3, 0), 0, 0)
    check(sq, i * i, 0, 0)


def test_special_values() -> None:
    x = Tensor(np.array([0.0, -1.0, 1e30, -1e30, 100.0], np.float32))
    cases = [
        (x.exp(), np.array([1, math.exp(-1), np.inf, 0, np.inf], np.float32)),
        (x.sigmoid(), np.array([0.5, sigmoid(np.array(-1.0)), 1, 0, 1], np.float32)),
        (x.tanh(), np.tanh(np.array([0.0, -1.0, 1e30, -1e30, 100.0])).astype(np.float32)),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, ref)
    logs = Tensor(np.array([0.0, -1.0], np.float32)).log().numpy()
    assert logs[0] == -np.inf and np.isnan(logs[1])


# ---- reductions ----

AXES: list[int | tuple[int, ...] | None] = [None, 0, 1, 2, -1, (0, 2), (2, 0), (0, 1, 2)]
REDUCTIONS: dict[str, tuple[Callable[..., Tensor], Callable[..., Any]]] = {
    "sum": (Tensor.sum, np.sum),
    "max": (Tensor.max, np.max),
    "min": (Tensor.min, np.min),
    "mean": (Tensor.mean, np.mean),
    "var": (Tensor.var, lambda a, axis, keepdims: np.var(a, axis=axis, keepdims=keepdims, ddof=1)),
    "std": (Tensor.std, lambda a, axis, keepdims: np.std(a, axis=axis, keepdims=keepdims, ddof=1)),
}


def reduced_count(shape: tuple[int, ...], axis: int | tuple[int, ...] | None) -> int:
    axes = range(len(shape)) if axis is None else [axis] if isinstance(axis, int) else axis
    return math.prod(shape[a] for a in axes)


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name: str) -> None:
    f, ref_f = REDUCTIONS[name]
    cases = []
    for k, shape in enumerate(SHAPES):
        a = floats(shape, 20 + k)
        for axis in AXES:
            if name in ("var", "std") and reduced_count(shape, axis) < 2:
                continue  # correction=1 divides by n - 1 = 0
            for keepdim in (False, True):
                ref = ref_f(a.astype(np.float64), axis=axis, keepdims=keepdim)
                cases.append((f(Tensor(a), axis, keepdim), ref, (shape, axis, keepdim)))
    realize_all(*(t for t, _, _ in cases))
    for t, ref, where in cases:
        assert t.dtype is dtypes.float32, where
        try:
            check(t, np.asarray(ref, np.float32), rtol=2e-5, atol=2e-6)
        except AssertionError as e:
            raise AssertionError(f"{name} of shape, axis, keepdim = {where}: {e}") from None


def test_var_and_std_take_a_correction() -> None:
    a = floats((2, 3, 5), 30)
    x = Tensor(a)
    cases = [
        (x.var(correction=0), np.var(a.astype(np.float64))),
        (x.var(1, correction=0), np.var(a.astype(np.float64), axis=1)),
        (x.std((0, 2), keepdim=True, correction=0), np.std(a.astype(np.float64), axis=(0, 2), keepdims=True)),
        (x.var(-1, correction=2), np.var(a.astype(np.float64), axis=-1, ddof=2)),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, np.asarray(ref, np.float32), rtol=2e-5, atol=2e-6)


def test_integer_and_bool_reductions() -> None:
    i = ints((2, 3, 5), 31)
    b = i > 0
    x, y = Tensor(i), Tensor(b)
    cases = [
        (x.sum(), i.sum(), dtypes.int64),  # numpy's width for sums of int32
        (x.sum((0, 2)), i.sum((0, 2)), dtypes.int64),
        (x.max(1), i.max(1), dtypes.int32),
        (x.min(-1, keepdim=True), i.min(-1, keepdims=True), dtypes.int32),
        (y.sum(), b.sum(), dtypes.int64),  # counts the true values
        (y.sum(0), b.sum(0), dtypes.int64),
        (x.mean(1), i.mean(1), dtypes.float32),
    ]
    realize_all(*(t for t, _, _ in cases))
    for t, ref, dt in cases:
        assert t.dtype is dt
        np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6)


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argmax_argmin_take_the_first_index_on_ties(fn: str) -> None:
    cases = []
    for k, shape in enumerate([*SHAPES, (7,)]):
        a = ints(shape, 40 + k, -2, 3).astype(np.float32)  # five values in many slots: lots of ties
        for axis in (None, *range(len(shape)), -1):
            for keepdim in (False, True):
                t = getattr(Tensor(a), fn)(axis, keepdim)
                if axis is None and keepdim:
                    continue  # numpy keeps every axis there; uopc returns the flat index
                cases.append((t, getattr(np, fn)(a, axis=axis, keepdims=keepdim)))
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.dtype is dtypes.int32
        np.testing.assert_array_equal(t.numpy(), ref)
        assert t.shape == np.shape(ref)


def test_argmax_of_int_and_bool_tensors() -> None:
    i = ints((3, 5), 45, -3, 4)
    b = i > 0
    cases = [
        (Tensor(i).argmax(1), i.argmax(1)),
        (Tensor(i).argmin(0), i.argmin(0)),
        (Tensor(b).argmax(1), b.argmax(1)),
        (Tensor(b).argmin(), b.argmin()),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        np.testing.assert_array_equal(t.numpy(), ref)


def log_softmax_ref(a: Array, axis: int) -> Array:
    m = a.max(axis=axis, keepdims=True)
    return np.asarray(a - m - np.log(np.exp(a - m).sum(axis=axis, keepdims=True)))


def test_logsumexp_softmax_log_softmax() -> None:
    cases = []
    for k, shape in enumerate(SHAPES):
        a = floats(shape, 50 + k, -3, 3)
        f = a.astype(np.float64)
        x = Tensor(a)
        for axis in (0, 1, -1, 2):
            lse = np.log(np.exp(f).sum(axis=axis, keepdims=True))
            cases += [
                (x.logsumexp(axis), lse.squeeze(axis)),
                (x.logsumexp(axis, keepdim=True), lse),
                (x.softmax(axis), np.exp(log_softmax_ref(f, axis))),
                (x.log_softmax(axis), log_softmax_ref(f, axis)),
            ]
        cases += [(x.softmax(), np.exp(log_softmax_ref(f, -1))), (x.log_softmax(), log_softmax_ref(f, -1))]
        cases.append((x.logsumexp((0, 2)), np.log(np.exp(f).sum(axis=(0, 2)))))
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        check(t, ref.astype(np.float32), rtol=2e-5, atol=2e-6)


def test_softmax_family_is_stable_for_large_logits() -> None:
    a = np.array([[1000.0, 1000.0, 990.0], [-1000.0, -1001.0, -1000.5]], np.float32)
    f = a.astype(np.float64)
    x = Tensor(a)
    cases = [
        (x.logsumexp(-1), np.log(np.exp(f - f.max(-1, keepdims=True)).sum(-1)) + f.max(-1)),
        (x.softmax(-1), np.exp(log_softmax_ref(f, -1))),
        (x.log_softmax(-1), log_softmax_ref(f, -1)),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert np.isfinite(t.numpy()).all()
        check(t, ref.astype(np.float32), rtol=1e-5, atol=1.5e-4)  # float32 spacing near 1000 is 6e-5


def test_log_softmax_keeps_its_precision_at_large_magnitudes(monkeypatch: pytest.MonkeyPatch) -> None:
    """x - logsumexp(x) cancels: at |x| = 1e8 float32's spacing is 8, so logsumexp's log(2) is lost and
    the result was 0; (x - max) - log(sum(exp(x - max))) subtracts before the magnitudes meet. Built
    without -fassociative-math, which would let gcc regroup it into x - (max + log(...)) again
    (notebook 70): the formula is what this test pins."""
    monkeypatch.setenv("CFLAGS", DEFAULT_CFLAGS.replace("-fassociative-math", ""))
    monkeypatch.setattr(realizer, "plans", PlanCache())  # no executable built under other flags
    a = np.array([[1e8, 1e8, 1e8 - 8], [-1e8, -1e8, -1e8]], np.float32)
    check(Tensor(a).log_softmax(-1), log_softmax_ref(a.astype(np.float64), -1).astype(np.float32), rtol=1e-6)


def test_one_hot_and_cross_entropy() -> None:
    logits = floats((2, 3, 5), 60, -3, 3)
    labels = ints((2, 3), 61, 0, 5)
    flat_logits, flat_labels = logits.reshape(6, 5), labels.reshape(6)
    f = flat_logits.astype(np.float64)
    ce = -log_softmax_ref(f, -1)[np.arange(6), flat_labels].mean()
    oh = Tensor(labels).one_hot(5)
    cases = [
        (Tensor(logits).cross_entropy(Tensor(labels)), ce),
        (Tensor(flat_logits).cross_entropy(Tensor(flat_labels)), ce),
        (Tensor(flat_logits[:1]).cross_entropy(Tensor(flat_labels[:1])), -log_softmax_ref(f, -1)[0, flat_labels[0]]),
    ]
    realize_all(oh, *(t for t, _ in cases))
    assert oh.dtype is dtypes.int32 and oh.shape == (2, 3, 5)
    np.testing.assert_array_equal(oh.numpy(), np.eye(5, dtype=np.int32)[labels])
    for t, ref in cases:
        assert t.shape == ()
        check(t, np.float32(ref), rtol=2e-5)


# ---- creation ----


def test_zeros_ones_full() -> None:
    cases: list[tuple[Tensor, Array]] = [
        (Tensor.zeros(2, 3), np.zeros((2, 3), np.float32)),
        (Tensor.zeros((4, 1, 5), dtype=dtypes.int32), np.zeros((4, 1, 5), np.int32)),
        (Tensor.ones(3), np.ones(3, np.float32)),
        (Tensor.ones(1, 3, 1, dtype=dtypes.int32), np.ones((1, 3, 1), np.int32)),
        (Tensor.full((2, 3), 1.5), np.full((2, 3), 1.5, np.float32)),
        (Tensor.full((3,), 7), np.full(3, 7, np.int32)),
        (Tensor.full((2, 2), True), np.full((2, 2), True)),
        (Tensor.full((), -2.0), np.array(-2.0, np.float32)),
        (Tensor.full((2,), 3, dtype=dtypes.float32), np.full(2, 3, np.float32)),
    ]
    realize_all(*(t for t, _ in cases))
    for t, ref in cases:
        assert t.numpy().dtype == ref.dtype
        np.testing.assert_array_equal(t.numpy(), ref)


def test_arange_and_eye() -> None:
    cases: list[tuple[Tensor, Array]] = [
        (Tensor.arange(5), np.arange(5, dtype=np.int32)),
        (Tensor.arange(2, 9, 3), np.arange(2, 9, 3, dtype=np.int32)),
        (Tensor.arange(5, 0, -2), np.arange(5, 0, -2, dtype=np.int32)),
        (Tensor.arange(0.0, 1.0, 0.25), np.arange(0.0, 1.0, 0.25, dtype=np.float32)),
        (Tensor.arange(4, dtype=dtypes.float32), np.arange(4, dtype=np.float32)),
        (Tensor.eye(3), np.eye(3, dtype=np.float32)),
        (Tensor.eye(2, 4), np.eye(2, 4, dtype=np.float32)),
        (Tensor.eye(3, dtype=dtypes.int32), np.eye(3, dtype=np.int32)),
    ]
    for t, ref in cases:
        assert t.numpy().dtype == ref.dtype
        np.testing.assert_array_equal(t.numpy(), ref)


def test_random_tensors_are_reproducible_with_manual_seed() -> None:
    def draw() -> list[Array]:
        return [
            Tensor.rand(2, 3).numpy(),
            Tensor.randn(4, 1, 5).numpy(),
            Tensor.uniform(3, 5, low=-2.0, high=-1.0).numpy(),
        ]

    Tensor.manual_seed(123)
    first = draw()
    Tensor.manual_seed(123)
    again = draw()
    Tensor.manual_seed(124)
    other = draw()
    for a, b, c in zip(first, again, other, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == np.float32
        assert not np.array_equal(a, c)
    assert first[0].shape == (2, 3) and first[1].shape == (4, 1, 5) and first[2].shape == (3, 5)


def test_random_distributions() -> None:
    Tensor.manual_seed(7)
    u, n = Tensor.rand(20000).numpy(), Tensor.randn(200, 100).numpy()
    w = Tensor.uniform(20000, low=-3.0, high=5.0).numpy()
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02
    assert w.min() >= -3 and w.max() < 5 and abs(w.mean() - 1) < 0.1
    assert Tensor.rand(3, dtype=dtypes.float64).dtype is dtypes.float64


# ---- basics: conversion, properties, realize, contiguous, detach, cast ----


def test_constructors_and_properties() -> None:
    x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == (2, 3) and x.dtype is dtypes.float32 and x.ndim == 2 and x.numel() == 6 and len(x) == 2
    assert x.device == os.environ.get("DEVICE", "C").upper()  # C unless the suite runs on another backend
    assert Tensor([1, 2]).dtype is dtypes.int32
    assert Tensor([True, False]).dtype is dtypes.bool
    assert Tensor(np.arange(3, dtype=np.int64)).dtype is dtypes.int64
    assert Tensor(2.5).shape == () and Tensor(2.5).item() == 2.5
    assert Tensor([1, 2], dtype=dtypes.float32).dtype is dtypes.float32
    assert Tensor(np.float64(1.0)).dtype is dtypes.float32  # not an ndarray: Python float rules
    assert "shape=(2, 3)" in repr(x) and "float32" in repr(x)


def test_numpy_returns_an_independent_copy() -> None:
    a = floats((2, 3), 70)
    x = Tensor(a)
    a[0, 0] = 100.0  # the tensor copied its input
    got = x.numpy()
    assert got[0, 0] != 100.0
    got[0, 1] = -100.0  # and numpy() copies its output
    assert x.numpy()[0, 1] != -100.0


def test_item() -> None:
    assert Tensor([[3.5]]).item() == 3.5
    assert isinstance(Tensor([[3.5]]).item(), float)
    v = Tensor([7]).sum().item()
    assert v == 7 and isinstance(v, int)
    assert Tensor(True).item() is True


def test_realize_returns_self_and_stores_a_buffer() -> None:
    a = floats((2, 3, 5), 71)
    y = (Tensor(a) * 2).sum(1)
    assert y.realize() is y
    np.testing.assert_allclose(y.numpy(), (a * 2).sum(1), rtol=1e-5)
    z = y + 1  # builds on the stored value
    np.testing.assert_allclose(z.numpy(), (a * 2).sum(1) + 1, rtol=1e-5)
    p, q = Tensor(a).exp(), Tensor(a).sin()
    Tensor.realize(p, q)  # several tensors in one plan
    np.testing.assert_allclose(q.numpy(), np.sin(a), rtol=1e-5, atol=1e-6)


def test_same_graph_realized_twice_in_one_call() -> None:
    a = floats((3, 5), 72)
    p, q = Tensor(a).sum(0), Tensor(a).sum(0)
    Tensor.realize(p, q, p)
    np.testing.assert_allclose(p.numpy(), a.sum(0), rtol=1e-5)
    np.testing.assert_allclose(q.numpy(), a.sum(0), rtol=1e-5)


def test_contiguous_detach_keep_values() -> None:
    a = floats((4, 1, 5), 73)
    x = Tensor(a)
    c = x.permute(2, 0, 1).contiguous()
    d = (x * 3).detach()
    realize_all(c, d)
    np.testing.assert_array_equal(c.numpy(), a.transpose(2, 0, 1))
    np.testing.assert_allclose(d.numpy(), a * 3, rtol=1e-6)
    assert c.shape == (5, 4, 1) and d.dtype is dtypes.float32


def test_cast() -> None:
    a = np.array([-2.7, -1.5, -0.2, 0.0, 0.6, 1.5, 2.99], np.float32)
    x = Tensor(a)
    i = x.cast(dtypes.int32)
    b = x.cast(dtypes.bool)
    back = i.cast(dtypes.float32)
    wide = x.cast(dtypes.float64)
    assert x.cast(dtypes.float32) is x
    realize_all(i, b, back, wide)
    assert i.dtype is dtypes.int32 and b.dtype is dtypes.bool and wide.dtype is dtypes.float64
    np.testing.assert_array_equal(i.numpy(), a.astype(np.int32))  # truncation toward zero, as numpy
    np.testing.assert_array_equal(b.numpy(), a.astype(bool))
    np.testing.assert_array_equal(back.numpy(), a.astype(np.int32).astype(np.float32))
    np.testing.assert_array_equal(wide.numpy(), a.astype(np.float64))
    assert wide.numpy().dtype == np.float64
    assert Tensor([True, False]).float().numpy().tolist() == [1.0, 0.0]


@pytest.mark.parametrize("k", [0, 1, 2, 5, 7])
def test_whole_powers_keep_integer_tensors_integer(k: int) -> None:
    x = np.array([-3, -1, 0, 2, 5], dtype=np.int32)
    out = Tensor(x) ** k
    assert out.dtype is dtypes.int32
    np.testing.assert_array_equal(out.numpy(), x.astype(np.int64) ** k)


INTEGER_POWER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32]


def integer_edges(np_dtype: type) -> Array:
    """Small bases and exponents, both ends of the range, and exponents as wide as the dtype has bits."""
    info = np.iinfo(np_dtype)
    small = [0, 1, 2, 3, 5, 7, 31, info.bits - 1, info.bits, info.max - 1, info.max]
    signed = [-1, -2, -3, -7, info.min, info.min + 1] if info.min < 0 else []
    return np.array(small + signed, np_dtype)


@pytest.mark.parametrize("np_dtype", INTEGER_POWER_DTYPES)
def test_integer_tensor_to_an_integer_tensor_power_wraps_as_numpy(np_dtype: type) -> None:
    """Every pair of edge values with an exponent >= 0 (numpy refuses negative ones), as a column against a
    row: the dtype stays, and overflow wraps as numpy's repeated products wrap."""
    v = integer_edges(np_dtype)
    base, expo = v.reshape(-1, 1), v[v >= 0].reshape(1, -1)
    out = Tensor(base) ** Tensor(expo)
    assert out.dtype is dtypes.by_name(np.dtype(np_dtype).name)
    np.testing.assert_array_equal(out.numpy(), base**expo)


@pytest.mark.parametrize("np_dtype", [np.int8, np.int32, np.int64])
def test_negative_integer_exponents_follow_pytorch(np_dtype: type) -> None:
    """numpy raises for an integer array to a negative integer power; PyTorch gives base ** e for the bases
    1 and -1 and 0 for every other base, 0 included (these values were checked against torch 2.13)."""
    info = np.iinfo(np_dtype)
    bases: Array = np.array([0, 1, -1, 2, -2, 3, info.min, info.max], np_dtype).reshape(-1, 1)
    expo: Array = np.array([-1, -2, -3, info.min, info.min + 1], np_dtype).reshape(1, -1)
    parity: Array = (expo.astype(np.int64) % 2).astype(np_dtype)
    want: Array = np.where(bases == 1, 1, np.where(bases == -1, 1 - 2 * parity, 0)).astype(np_dtype)
    np.testing.assert_array_equal((Tensor(bases) ** Tensor(expo)).numpy(), want)


def test_integer_powers_with_a_python_base_or_mixed_dtypes_stay_integer() -> None:
    e = np.array([0, 1, 5, 30, 31, 40, -1], np.int32)
    two = 2 ** Tensor(e)
    assert two.dtype is dtypes.int32
    np.testing.assert_array_equal(two.numpy(), [1, 2, 32, 2**30, -(2**31), 0, 0])  # 2 ** 31 wraps; 2 ** 40 is 0
    wide = Tensor(np.array([3, -3], np.int32)) ** Tensor(np.array([39, 39], np.int64))
    assert wide.dtype is dtypes.int64
    np.testing.assert_array_equal(wide.numpy(), np.array([3, -3], np.int64) ** 39)  # exact: 3**39 < 2**63
    flags = Tensor([True, False, False]) ** Tensor(np.array([2, 0, 3], np.int32))
    assert flags.dtype is dtypes.int32 and flags.numpy().tolist() == [1, 1, 0]
    halves = 0.5 ** Tensor(e[:3])
    assert halves.dtype is dtypes.float32 and halves.numpy().tolist() == [1.0, 0.5, 0.03125]


@pytest.mark.parametrize("np_dtype", [np.int32, np.int64])
def test_integer_power_of_a_choice_between_fixed_values_builds_in_seconds(
    np_dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A base that is one of two values fixed for the whole kernel (a 0-d tensor or 0, by a mask): 31 squares
    of such a base kept gcc busy for minutes with gigabytes. CC runs under a time limit here (which also makes
    it a new compiler for the kernel cache, so the kernel is built afresh): a build past it is a CompileError."""
    monkeypatch.setenv("CC", "timeout -s KILL 60 gcc")
    e: Array = np.array([[-1, 0, 1], [2, 3, 31]], np_dtype)
    k: Array = np.array(7, np_dtype)
    got = ((Tensor(e) > 0).where(Tensor(k), 0) ** Tensor(e)).numpy()
    np.testing.assert_array_equal(got, np.where(e > 0, k, 0) ** np.maximum(e, 0) * (e >= 0))


def test_argmax_of_nan_is_the_first_nan_as_in_numpy() -> None:
    x = np.array([[1.0, np.nan, 2.0, np.nan], [3.0, 0.0, 1.0, 2.0]], dtype=np.float32)
    np.testing.assert_array_equal(Tensor(x).argmax(1).numpy(), np.argmax(x, 1))


def test_numpy_integers_index_like_ints() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(Tensor(x)[np.int64(1), np.int32(-1)].numpy(), x[1, -1])


@pytest.mark.parametrize(
    ("values", "np_dtype"),
    [([3, 1, 2, 1], np.uint8), ([0, 2**31 - 1, -(2**31), -5], np.int32), ([1.5, -2.0, -2.0, 7.0], np.float32)],
)
def test_argmin_handles_unsigned_and_the_smallest_integer(values: list[float], np_dtype: type) -> None:
    """argmin by negation would wrap for these: -0 of uint8 is 0, and -INT_MIN is INT_MIN."""
    x: np.ndarray[Any, Any] = np.array(values, dtype=np_dtype)
    assert Tensor(x).argmin().item() == int(np.argmin(x))
    assert Tensor(x).argmax().item() == int(np.argmax(x))


def test_sums_of_narrow_integers_count_in_int32() -> None:
    x = np.array([100, 100, 100], dtype=np.int8)
    assert Tensor(x).sum().item() == 300  # numpy agrees: it sums int8 in a wider type


def test_numpy_scalars_act_like_python_scalars() -> None:
    x = Tensor(np.array([1, 2], dtype=np.int32))
    np.testing.assert_array_equal((x * np.float32(0.5)).numpy(), [0.5, 1.0])
    np.testing.assert_array_equal((x + np.int64(3)).numpy(), [4, 5])


def test_python_ints_beyond_int32_make_an_int64_tensor() -> None:
    t = Tensor([3_000_000_000, 1])
    assert t.dtype is dtypes.int64
    assert t.numpy().tolist() == [3_000_000_000, 1]


def test_zero_dimensional_tensors_accept_axis_zero() -> None:
    t = Tensor(3.0)
    assert t.mean(0).item() == 3.0 and t.sum(-1).item() == 3.0 and t.squeeze(0).shape == ()


def test_device_names_ignore_case() -> None:
    assert (Tensor([1.0], device="c") + Tensor([2.0], device="C")).item() == 3.0
