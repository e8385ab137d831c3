"""NaN, infinities, signed zeros, integer widths, float16 and float64, and gradients far from the origin.

numpy is the oracle for forward values wherever it has the function, computed in float64 in a form that
neither overflows nor cancels; gradients are checked against central differences of those float64
functions. Where numpy has no such function (relu's gradient, logsumexp, cross_entropy) or PyTorch fixes a
convention (the gradient of x**y at x = 0, of max at NaN), the expected values are written out, each one
checked against torch 2.13.0 on CPU.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.tensor import Tensor, dtypes

Array = npt.NDArray[Any]
nan, inf = math.nan, math.inf

EDGES = np.array(
    [nan, -inf, -1e30, -100.0, -1.5, -1e-30, -1e-40, -0.0, 0.0, 1e-40, 1e-30, 1.5, 100.0, 1e30, inf], np.float32
)


def same(got: Array, want: Array) -> None:
    """Equal values, NaN where numpy has NaN, and the same sign on every zero."""
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg="a zero with the wrong sign")


# ---- float semantics: comparisons, sign, abs, relu, max and min ----

COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "lt": operator.lt,
    "gt": operator.gt,
    "le": operator.le,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}


@pytest.mark.parametrize("name", list(COMPARISONS))
def test_comparisons_with_nan_inf_and_signed_zeros_match_numpy(name: str) -> None:
    op = COMPARISONS[name]
    a, b = EDGES[:, None], EDGES[None, :]
    with np.errstate(invalid="ignore"):
        want = [op(a, b), op(a, nan), op(a, 0.0), op(a, -inf)]
    got = [op(Tensor(a), Tensor(b)), op(Tensor(a), nan), op(Tensor(a), 0.0), op(Tensor(a), -inf)]
    Tensor.realize(*got)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


def test_sign_and_abs_match_numpy_at_nan_and_zeros() -> None:
    x = Tensor(EDGES)
    sign, magnitude = x.sign(), x.abs()
    Tensor.realize(sign, magnitude)
    same(sign.numpy(), np.sign(EDGES))  # sign(nan) is nan; sign(-0.0) is +0.0
    same(magnitude.numpy(), np.abs(EDGES))  # |-0.0| is +0.0


def test_integer_sign_and_abs_are_unchanged() -> None:
    i = np.array([-7, -1, 0, 1, 7], np.int32)
    np.testing.assert_array_equal(Tensor(i).sign().numpy(), np.sign(i))
    np.testing.assert_array_equal(Tensor(i).abs().numpy(), np.abs(i))


def test_relu_maximum_and_minimum_propagate_nan() -> None:
    x = Tensor(EDGES)
    relu, hi, lo = x.relu(), x.maximum(0.0), x.minimum(0.0)
    Tensor.realize(relu, hi, lo)
    np.testing.assert_array_equal(relu.numpy(), np.maximum(EDGES, 0))  # torch.relu(nan) is nan too
    np.testing.assert_array_equal(hi.numpy(), np.maximum(EDGES, 0))
    np.testing.assert_array_equal(lo.numpy(), np.minimum(EDGES, 0))


@pytest.mark.parametrize("n", [7, 1000])
def test_max_and_min_reductions_propagate_nan_from_any_position(n: int) -> None:
    # a vectorized max (maxps) returns its second operand when one is NaN: the NaN must survive any lane
    a = np.tile(np.random.default_rng(4).standard_normal(n).astype(np.float32), (4, 1))
    for row, k in enumerate([0, 1, n // 2, n - 1]):
        a[row, k] = nan
    x = Tensor(a)
    results = [x.max(1), x.min(1), x.max(), x.argmax(1), x.argmin(1)]
    Tensor.realize(*results)
    for t in results[:3]:
        assert np.isnan(t.numpy()).all()
    np.testing.assert_array_equal(results[3].numpy(), np.argmax(a, 1))
    np.testing.assert_array_equal(results[4].numpy(), np.argmin(a, 1))


# ---- activations: exact at the edges, tiny magnitudes included ----


def sigmoid64(x: Array) -> Array:
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e / (1 + e), 1 / (1 + e))


def gelu_erf64(x: Array) -> Array:
    """Exact GELU, x P(X <= x), as x erfc(-x / sqrt 2) / 2 with the C library's erfc."""
    return np.asarray(x * 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2)))


def gelu_tanh64(x: Array) -> Array:
    """The tanh approximation, as x * sigmoid(2z): the same function as 0.5 x (1 + tanh z), without the
    cancellation of 1 + tanh z for negative z that makes float64 lose it below x = -6."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return np.asarray(x * sigmoid64(2 * z))


ACTIVATIONS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Array], Array]]] = {
    "sigmoid": (Tensor.sigmoid, sigmoid64),
    "tanh": (Tensor.tanh, np.tanh),
    "silu": (Tensor.silu, lambda x: x * sigmoid64(x)),
    "gelu": (Tensor.gelu, gelu_erf64),
    "gelu_tanh": (lambda t: t.gelu("tanh"), gelu_tanh64),
}
# magnitudes from the smallest float32 normal to past where exp overflows, both signs, and the edges
SWEEP = np.concatenate([np.geomspace(1.2e-38, 1e4, 400), -np.geomspace(1.2e-38, 1e4, 400)]).astype(np.float32)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_are_accurate_everywhere(name: str) -> None:
    f, ref = ACTIVATIONS[name]
    points = np.concatenate([EDGES, SWEEP])
    got = f(Tensor(points)).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref(points.astype(np.float64)).astype(np.float32)
    assert got.dtype == np.float32
    # relative: tanh(1e-30) must be 1e-30, not 0. A float32 denormal holds few bits: silu(-100) is -100 times
    # sigmoid(-100) = 3.8e-44, off by up to 100 of its 1.4e-45 steps
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-43)
    same(got[np.isin(points, [0.0])], want[np.isin(points, [0.0])])  # f(-0.0) is -0.0, as in numpy


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_of_float64_compute_in_float64(name: str) -> None:
    f, ref = ACTIVATIONS[name]
    points = np.concatenate([EDGES.astype(np.float64), np.linspace(-30, 30, 61), np.geomspace(1e-3, 1, 25), [-1e-200]])
    got = f(Tensor(points)).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref(points)
    assert got.dtype == np.float64
    # gelu(-27) is e^-500: a rounding of z in its last bit moves it by 500 * 1.1e-16
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


# ---- logsumexp, softmax and cross-entropy with infinite logits ----


def test_logsumexp_and_softmax_of_infinite_rows() -> None:
    rows = np.array([[-inf, -inf], [inf, inf], [inf, 1.0], [-inf, 1.0], [nan, 1.0]], np.float32)
    x = Tensor(rows)
    lse, sm, lsm = x.logsumexp(-1), x.softmax(-1), x.log_softmax(-1)
    Tensor.realize(lse, sm, lsm)
    # each as torch 2.13 gives it (numpy has no logsumexp; scipy's agrees on the first two rows)
    np.testing.assert_array_equal(lse.numpy(), [-inf, inf, inf, 1.0, nan])
    np.testing.assert_array_equal(sm.numpy(), [[nan, nan], [nan, nan], [nan, nan], [0.0, 1.0], [nan, nan]])
    np.testing.assert_array_equal(lsm.numpy()[3], [-inf, 0.0])
    assert np.isnan(lsm.numpy()[[0, 1, 2, 4]]).all()  # NaN wherever softmax is NaN


def test_cross_entropy_with_minus_inf_logits_of_other_classes() -> None:
    # -inf masks a class out, as attention masks do; it must not turn the loss or its gradient into NaN
    logits = np.array([[0.0, -inf, 1.0], [2.0, 0.0, -inf]], np.float32)
    x = Tensor(logits, requires_grad=True)
    loss = x.cross_entropy(Tensor(np.array([0, 1], np.int32)))
    loss.backward()
    assert x.grad is not None
    # torch 2.13: loss 1.720094919204712, gradient [[-0.3655, 0, 0.3655], [0.4404, -0.4404, 0]]
    p0, p1 = np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum(), np.exp([2.0, 0.0]) / np.exp([2.0, 0.0]).sum()
    assert loss.item() == pytest.approx(-(math.log(p0[0]) + math.log(p1[1])) / 2, rel=1e-6)
    want = np.array([[p0[0] - 1, 0, p0[1]], [p1[0], p1[1] - 1, 0]]) / 2
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-7)


# ---- accumulators and result dtypes ----

INTEGER_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("np_name", INTEGER_DTYPES)
def test_integer_sums_take_numpy_s_width(np_name: str) -> None:
    info = np.iinfo(np_name) if np_name != "bool" else None
    top = 1 if info is None else min(int(info.max), 2**40)  # int64 and uint64 sums of these do not wrap
    a = np.random.default_rng(3).integers(0, top, (3, 70), endpoint=True).astype(np_name)
    a[0] = top  # a row that wraps in its own width: 70 * max
    x = Tensor(a)
    whole, rows = x.sum(), x.sum(1)
    Tensor.realize(whole, rows)
    for got, want in ((whole, np.sum(a)), (rows, np.sum(a, axis=1))):
        assert got.numpy().dtype == want.dtype, f"sum of {np_name}: {got.dtype.name}, numpy says {want.dtype}"
        np.testing.assert_array_equal(got.numpy(), want)


def test_integer_mean_is_the_exact_mean_rounded_once() -> None:
    # float32 accumulation drops every + 1 after 2**24; an int64 sum keeps them
    a = np.array([2**24] + [1] * 4095, np.int32)
    got = Tensor(a).mean()
    assert got.dtype is dtypes.float32
    assert got.item() == np.float32(np.mean(a))


HALF_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "mean": lambda t: t.mean(-1),
    "var": lambda t: t.var(-1),
    "std": lambda t: t.std(-1),
    "sigmoid": Tensor.sigmoid,
    "tanh": Tensor.tanh,
    "gelu": Tensor.gelu,
    "gelu_tanh": lambda t: t.gelu("tanh"),
    "silu": Tensor.silu,
    "relu": Tensor.relu,
    "softmax": lambda t: t.softmax(-1),
    "log_softmax": lambda t: t.log_softmax(-1),
    "logsumexp": lambda t: t.logsumexp(-1),
}


@pytest.mark.parametrize("name", list(HALF_FUNCTIONS))
def test_float16_stays_float16(name: str) -> None:
    f = HALF_FUNCTIONS[name]
    a = np.random.default_rng(5).uniform(-4, 4, (3, 40)).astype(np.float16)
    got, wide = f(Tensor(a)), f(Tensor(a.astype(np.float32)))
    Tensor.realize(got, wide)
    assert got.dtype is dtypes.float16
    np.testing.assert_allclose(got.numpy(), wide.numpy().astype(np.float16), rtol=2e-3, atol=2e-3)


def test_float64_statistics_keep_float64() -> None:
    a = np.random.default_rng(6).standard_normal((4, 50)) * 1e-3 + 1e3  # float32 would lose the spread
    x = Tensor(a)
    mean, var, std = x.mean(1), x.var(1), x.std(1)
    Tensor.realize(mean, var, std)
    assert mean.dtype is var.dtype is std.dtype is dtypes.float64
    np.testing.assert_allclose(mean.numpy(), a.mean(1), rtol=1e-14)
    np.testing.assert_allclose(var.numpy(), a.var(1, ddof=1), rtol=1e-8)
    np.testing.assert_allclose(std.numpy(), a.std(1, ddof=1), rtol=1e-8)


# ---- gradients at the edges ----

OUT = [1e-3, 1, 5, 11, 20, 45, 50, 89, 100, 1e4, 1e30]  # 11, 45 and 89: past where gelu, tanh, sigmoid broke
FAR = np.array([-v for v in reversed(OUT)] + [0.0] + OUT)


def central_difference(f: Callable[[Array], Array], x: Array) -> Array:
    h = 1e-6 * np.maximum(1.0, np.abs(x))
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("np_dtype", ["float32", "float64"])
def test_activation_gradients_far_out_are_finite_and_right(name: str, np_dtype: str) -> None:
    # exp(-x) overflows below -88.7 in float32 (-709 in float64); 0 * inf there gave NaN gradients
    f, ref = ACTIVATIONS[name]
    x = Tensor(FAR.astype(np_dtype), requires_grad=True)
    f(x).sum().backward()
    assert x.grad is not None
    got = x.grad.numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        want = central_difference(ref, FAR)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=f"d {name} / dx at {FAR}")


def grads_of(f: Callable[..., Tensor], *values: Array) -> list[Array]:
    leaves = [Tensor(np.asarray(v, np.float32), requires_grad=True) for v in values]
    f(*leaves).sum().backward()
    return [leaf.grad.numpy() for leaf in leaves if leaf.grad is not None]


def test_std_of_constant_values_has_gradient_zero_as_in_pytorch() -> None:
    # d sqrt(v) / dv is infinite at v = 0, and the centered values are 0 there: 0 * inf would be NaN.
    # torch 2.13 gives 0 (its std backward masks the zero spread); so does the limit along any direction
    # that keeps the values equal
    (d_std,) = grads_of(lambda a: a.std(1), np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]))
    assert (d_std[0] == 0).all()
    want = central_difference(lambda v: np.std([1.0, 2.0, 4.0] + v * np.eye(3), axis=1, ddof=1), np.zeros(1))
    np.testing.assert_allclose(d_std[1], want, rtol=1e-4)


def test_pow_gradients_at_base_zero_follow_pytorch() -> None:
    exponents = np.array([3.0, 2.0, 1.0, 0.5, 0.0, -0.5, -1.0], np.float32)
    base = np.zeros_like(exponents)
    d_base, d_exp = grads_of(lambda a, b: a**b, base, exponents)
    # torch 2.13: d/dx x**y at x = 0 is 0 for y = 0 and y > 1, 1 for y = 1, inf for 0 < y < 1, -inf for y < 0;
    # d/dy is 0 for y >= 0 (where log 0 would multiply a 0) and -inf for y < 0
    np.testing.assert_array_equal(d_base, [0, 0, 1, inf, 0, -inf, -inf])
    np.testing.assert_array_equal(d_exp, [0, 0, 0, 0, 0, -inf, -inf])
    (d_scalar,) = grads_of(lambda a: a**0.0, np.array([0.0, 2.0]))
    np.testing.assert_array_equal(d_scalar, [0, 0])  # x ** 0 is constant, even at 0
    (d_rpow,) = grads_of(lambda b: 0.0**b, np.array([0.0, 1.0]))
    np.testing.assert_array_equal(d_rpow, [0, 0])


def test_gradients_at_nan_follow_pytorch() -> None:
    # torch 2.13: max gives the gradient to the NaNs, shared among them; maximum and minimum with one NaN
    # operand send it to both operands; relu passes it through a NaN
    (d_max,) = grads_of(lambda a: a.max(), np.array([1.0, nan, 3.0, nan]))
    np.testing.assert_array_equal(d_max, [0, 0.5, 0, 0.5])
    for op in (Tensor.maximum, Tensor.minimum):
        d_a, d_b = grads_of(op, np.array([nan, 1.0, 1.0]), np.array([1.0, nan, 1.0]))
        np.testing.assert_array_equal(d_a, [1, 1, 0.5])
        np.testing.assert_array_equal(d_b, [1, 1, 0.5])
    (d_relu,) = grads_of(Tensor.relu, np.array([nan, -0.0, 0.0, 1.0, -1.0]))
    np.testing.assert_array_equal(d_relu, [1, 0, 0, 1, 0])
