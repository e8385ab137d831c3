"""The ops people port scripts with (issue 11): values and semantics against numpy and the C library.

Gradients are in test_autodiff.py (finite differences), and everything again against PyTorch in
tests-e2e/test_torch_differential.py; these tests need neither, so the package's suite stands alone.
Shapes keep distinct axis lengths, so a swapped axis cannot hide behind a square.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

from uopc.ir import Ops
from uopc.lower import linearize, make_plan, normalize
from uopc.tensor import Tensor, TensorError, dtypes
from uopc.tensor.realize import realize

pytestmark = pytest.mark.sanitize  # rerun with kernels under ASan and UBSan (hatch env sanitize)

Array = npt.NDArray[Any]
nan, inf = math.nan, math.inf
RNG = np.random.default_rng(11)
A = RNG.standard_normal((3, 4, 5)).astype(np.float32)


def same(got: Tensor, want: Any, exact: bool = True) -> None:
    """Same shape and values; exactly (NaN where numpy has NaN, and the signs of zeros) unless told not."""
    a, b = got.numpy(), np.asarray(want)
    assert a.shape == b.shape, f"shape {a.shape}, numpy says {b.shape}"
    if exact:
        np.testing.assert_array_equal(a, b)
        if a.dtype.kind == "f":
            numbers = ~np.isnan(b)
            np.testing.assert_array_equal(np.signbit(a[numbers]), np.signbit(b[numbers]))
    else:
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


# ---- elementwise ----


HALVES = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 3.7, -3.7, 1e20, -1e20])
EDGES = np.array([nan, inf, -inf, 2.0**23 + 1, -(2.0**23) - 1, 1e-45, -1e-45])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_rounding_matches_numpy(dtype: str) -> None:
    """round is half to even and a zero keeps the sign of x (round(-0.4) = -0.0), as numpy's; big values,
    which are whole already, and inf and NaN pass through (a cast to int64 would be undefined for them)."""
    with np.errstate(over="ignore"):
        x = np.concatenate([HALVES, EDGES]).astype(dtype)
    t = Tensor(x)
    pairs = [(t.floor(), np.floor(x)), (t.ceil(), np.ceil(x)), (t.trunc(), np.trunc(x)), (t.round(), np.round(x))]
    for got, want in pairs:
        assert got.dtype.name == dtype
        same(got, want)


def test_rounding_keeps_integers() -> None:
    i = np.array([-3, 0, 7], np.int32)
    for f in (Tensor.floor, Tensor.ceil, Tensor.round, Tensor.trunc):
        same(f(Tensor(i)), i)


def test_erf_is_accurate_in_float64_everywhere() -> None:
    """Taylor series below |x| = 2 and the continued fraction above, each to within a few ulp of the C
    library's erf, on both sides of the switch and far out; erf(-0.0) = -0.0."""
    x = np.concatenate([np.linspace(-7, 7, 1401), [1.9999999, 2.0, 2.0000001, -2.0, 1e-300, -0.0, 30.0, 1e300]])
    got = Tensor(x).erf().numpy()
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=4e-16)
    assert np.signbit(got[-3])
    same(Tensor([nan, inf, -inf]).erf(), np.array([nan, 1.0, -1.0], np.float32))


def test_erf_of_float32_and_integers() -> None:
    x = np.linspace(-5, 5, 201).astype(np.float32)
    np.testing.assert_allclose(Tensor(x).erf().numpy(), [math.erf(v) for v in x], rtol=3e-7, atol=1e-7)
    got = Tensor([0, 1, 3]).erf()
    assert got.dtype is dtypes.float32
    np.testing.assert_allclose(got.numpy(), [math.erf(v) for v in (0, 1, 3)], rtol=3e-7)


def test_gelu_names_its_approximation() -> None:
    x = np.linspace(-4, 4, 17)
    exact = x * 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in x])
    tanh_form = x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))  # = 0.5 x (1 + tanh z)
    np.testing.assert_allclose(Tensor(x).gelu().numpy(), exact, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(Tensor(x).gelu("tanh").numpy(), tanh_form, rtol=1e-14, atol=1e-300)
    assert np.abs(exact - tanh_form).max() > 1e-4  # the two forms really differ
    with pytest.raises(TensorError, match="approximate must be 'none' or 'tanh'"):
        Tensor(x).gelu("erf")


def sigmoid(x: Array) -> Array:
    return np.asarray(1 / (1 + np.exp(-x)))


ACTIVATIONS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Array], Array]]] = {
    "leaky_relu": (lambda t: t.leaky_relu(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (lambda t: t.elu(0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(np.minimum(x, 0)))),
    "softplus": (Tensor.softplus, lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))),
    "softplus beta": (lambda t: t.softplus(2.0, 3.0), lambda x: np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2)),
    "relu6": (Tensor.relu6, lambda x: np.clip(x, 0, 6)),
    "hardswish": (Tensor.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "log2": (lambda t: t.abs().log2(), lambda x: np.log2(np.abs(x))),
    "exp2": (Tensor.exp2, np.exp2),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_in_float64(name: str) -> None:
    f, ref = ACTIVATIONS[name]
    x = np.concatenate([np.linspace(-30, 30, 241), [1e-12, -1e-12, 3.0, -3.0, 6.0, 0.0]])
    with np.errstate(divide="ignore"):
        want = ref(x)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), want, rtol=1e-14, atol=1e-300)


def test_small_arguments_keep_their_digits() -> None:
    """elu(-1e-10) is -1e-10 and softplus(-30) is 9.4e-14, not the 0 that exp(x) - 1 and log(1 + e^x) give
    in float32."""
    x = Tensor(np.array([-1e-10, -30.0], np.float32))
    np.testing.assert_allclose(x.elu().numpy()[0], -1e-10, rtol=1e-6)
    np.testing.assert_allclose(x.softplus().numpy()[1], math.log1p(math.exp(-30)), rtol=1e-6)
    assert Tensor([1e-30]).exp2().item() == 1.0 and Tensor([3.0]).exp2().item() == 8.0  # exact at whole x


def test_clip_follows_pytorch() -> None:
    x = np.array([-2.0, -0.0, 0.5, 3.0, nan], np.float32)
    same(Tensor(x).clip(-1, 1), np.array([-1, -0.0, 0.5, 1, nan], np.float32))
    same(Tensor(x).clamp(min=0.0), np.array([0, -0.0, 0.5, 3, nan], np.float32))  # -0.0 is not below 0
    same(Tensor(x).clip(2, 1), np.array([1, 1, 1, 1, nan], np.float32))  # min > max: max everywhere
    same(Tensor(x).clip(0.0, nan), np.full(5, nan, np.float32))  # a NaN bound makes NaN
    same(Tensor([1, 5, 9]).clip(2, 6), np.array([2, 5, 6], np.int32))
    same(Tensor([1, 5, 9]).clip(2.5), np.array([2.5, 5, 9], np.float32))  # a float bound makes floats
    same(Tensor(x).clip(Tensor([0.0] * 5), 1.0), np.array([0, -0.0, 0.5, 1, nan], np.float32))
    with pytest.raises(TensorError, match="give min, max or both"):
        Tensor(x).clip()


def test_isinf_isfinite_and_masked_fill() -> None:
    x = np.array([1.0, inf, -inf, nan, -0.0], np.float32)
    same(Tensor(x).isinf(), np.isinf(x))
    same(Tensor(x).isfinite(), np.isfinite(x))
    same(Tensor([1, 2]).isinf(), np.array([False, False]))
    same(Tensor(A).masked_fill(Tensor(A > 0), -1.5), np.where(A > 0, np.float32(-1.5), A))
    # the value takes the tensor's dtype, truncated as numpy's astype would
    same(Tensor([[1, 2, 3]]).masked_fill(Tensor([True, False, True]), 7.9), np.array([[7, 2, 7]], np.int32))
    with pytest.raises(TensorError, match="does not broadcast"):
        Tensor(A[0]).masked_fill(Tensor(A > 0), 1.0)


def test_method_names_of_operators_and_casts() -> None:
    x = Tensor(A)
    for got, want in [
        (x.add(2), A + 2),
        (x.add(x, alpha=3), A + 3 * A),
        (x.sub(1.5, alpha=2), A - 3),
        (x.mul(x), A * A),
        (x.div(4), A / 4),
        (x.neg(), -A),
        (x.pow(2), A * A),
    ]:
        same(got, want, exact=False)
    for method, np_dtype in [("int", np.int32), ("long", np.int64), ("half", np.float16), ("double", np.float64)]:
        got = getattr(x, method)()
        assert got.numpy().dtype == np_dtype
        same(got, A.astype(np_dtype))
    same(Tensor([0.0, 2.0, nan]).bool(), np.array([False, True, True]))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floor_division_and_modulo_of_floats_are_numpys(dtype: str) -> None:
    """Python's and numpy's semantics: the quotient floored, the remainder with the divisor's sign (and its
    zero's sign), by zero a / b and NaN; huge quotients exact, where a - b * floor(a / b) would be far off.
    Reversed operators, in-place ones, and an integer tensor with a float divisor (promoted, as numpy)."""
    rng = np.random.default_rng(12)
    a = np.concatenate([rng.standard_normal(40) * 1e3, [1e30, -1e30, 7.5, -7.5, 0.0, -0.0, inf, -inf, nan, 1.0, -1.0]])
    b = np.concatenate([rng.standard_normal(40), [3.0, 3.0, -2.0, 2.0, -3.0, 3.0, 2.0, 2.0, 1.0, inf, inf]])
    with np.errstate(all="ignore"):
        a, b = a.astype(dtype), b.astype(dtype)  # 1e30 is inf in float16
        b[::7] = 0.0
        for got, want in [
            (Tensor(a) // Tensor(b), a // b),
            (Tensor(a) % Tensor(b), a % b),
            (7.5 // Tensor(b), np.asarray(7.5, dtype) // b),
            (-7.5 % Tensor(b), np.asarray(-7.5, dtype) % b),
            (Tensor(a) % 2.5, a % np.asarray(2.5, dtype)),
        ]:
            same(got, want)
        t = Tensor(a)
        t %= 3.0
        same(t, a % np.asarray(3.0, dtype))
    ints = np.array([7, -7, 7, -7], np.int32)
    same(Tensor(ints) // 2.0, ints.astype(np.float32) // np.float32(2.0))
    same(Tensor(ints) % -2.5, ints.astype(np.float32) % np.float32(-2.5))


def test_gradients_of_modulo_and_floor_division() -> None:
    """a % b = a - b * floor(a / b): 1 for a and -floor(a / b) for b, PyTorch's rule (also at a = inf, where
    PyTorch gives 1), checked against finite differences in float64 away from the jumps. Floor division is
    piecewise constant, as floor: no gradient, and PyTorch defines none."""
    a = np.array([5.5, -5.5, 2.25, -0.75, 1e3], np.float64)
    b = np.array([2.0, 2.0, -1.5, 0.5, 7.0], np.float64)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    (ta % tb).sum().backward()
    assert ta.grad is not None and tb.grad is not None
    h = 1e-6
    for leaf, grad in [(0, ta.grad.numpy()), (1, tb.grad.numpy())]:
        step = np.eye(2)[leaf] * h
        numeric = (np.mod(a + step[0], b + step[1]) - np.mod(a - step[0], b - step[1])) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6)
    np.testing.assert_array_equal(grads(lambda t: t % 2.0, [inf, nan, -3.0]), [1.0, 1.0, 1.0])
    assert not (Tensor(a, requires_grad=True) // 2.0).requires_grad


# ---- reductions along axes ----


def test_prod_any_all() -> None:
    same(Tensor(A).prod(1), A.prod(1, dtype=np.float32), exact=False)
    same(Tensor(A).prod((0, 2), keepdim=True), A.prod((0, 2), keepdims=True), exact=False)
    ints = np.array([[2**20, 2**20, 4], [-3, 1, 2]], np.int32)
    same(Tensor(ints).prod(1), ints.astype(np.int64).prod(1))  # int64, as numpy's: 2**42 does not wrap
    same(Tensor([True, False]).prod(), np.int64(0))
    x = np.array([[0.0, nan, 0.0], [0.0, 0.0, 0.0], [1.0, -1.0, 2.0]], np.float32)
    same(Tensor(x).any(1), x.any(1))  # NaN counts as true, as in numpy
    same(Tensor(x).all(1), x.all(1))
    same(Tensor(x).any(), np.bool_(True))
    same(Tensor(np.array([3, 0], np.int32)).all(0, keepdim=True), np.array([False]))


def test_cumsum() -> None:
    for axis in (0, 1, -1):
        same(Tensor(A).cumsum(axis), np.cumsum(A, axis), exact=False)
    i = np.array([[2**31 - 1, 1], [5, -7]], np.int32)
    same(Tensor(i).cumsum(1), np.cumsum(i.astype(np.int64), 1))  # int64, as numpy's
    same(Tensor([True, True, False]).cumsum(0), np.array([1, 2, 2]))
    same(Tensor(np.float32(2.5)).cumsum(0), np.float32(2.5))


def stable_order(a: Array, axis: int, descending: bool) -> Array:
    """numpy's stable argsort with NaN last; descending with NaN first, equal values still in order."""
    if not descending:
        return np.argsort(a, axis, kind="stable")
    key = np.where(np.isnan(a), -inf, -a)  # NaN first; -(-0.0) and -(0.0) tie as they should
    return np.argsort(key, axis, kind="stable")


@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_and_puts_nan_last(descending: bool) -> None:
    x = np.array([[3.0, nan, -1.0, 3.0, -0.0, 0.0, -inf], [2.0, 2.0, 2.0, 1.0, nan, nan, inf]], np.float32)
    values, indices = Tensor(x).sort(1, descending=descending)
    order = stable_order(x, 1, descending)
    same(indices, order.astype(np.int32))
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, 1))  # -0.0 may come out +0.0
    v, i = Tensor(A).sort(0, descending=descending)
    same(i, stable_order(A, 0, descending).astype(np.int32))
    same(v, np.take_along_axis(A, stable_order(A, 0, descending), 0))


def test_topk() -> None:
    values, indices = Tensor(A).topk(2, 1)
    order = np.argsort(-A, 1, kind="stable")[:, :2]
    same(indices, order.astype(np.int32))
    same(values, np.take_along_axis(A, order, 1))
    smallest, _ = Tensor(A).topk(3, largest=False)
    same(smallest, np.sort(A, -1)[..., :3])
    with pytest.raises(TensorError, match="k must be an integer from 1 to 5"):
        Tensor(A).topk(6)


# ---- selecting by index ----


def test_gather_and_take_along_axis() -> None:
    for axis in range(3):
        shape = tuple(6 if i == axis else s - 1 for i, s in enumerate(A.shape))  # longer on axis, shorter off it
        idx = RNG.integers(0, A.shape[axis], shape)
        cut = A[tuple(slice(None) if i == axis else slice(0, s) for i, s in enumerate(shape))]
        same(Tensor(A).gather(axis, Tensor(idx)), np.take_along_axis(cut, idx, axis))
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\)"):
        Tensor(A).gather(1, Tensor(np.full((3, 1, 5), 4)))
    with pytest.raises(TensorError, match="integer tensor of 3 axes"):
        Tensor(A).gather(1, Tensor(np.zeros((3, 1), np.int32)))


def test_scatter_and_scatter_add() -> None:
    base = np.zeros((3, 5), np.float32)
    idx = np.array([[0, 1, 2, 0, 1], [2, 0, 1, 1, 0]])
    src = RNG.standard_normal((2, 5)).astype(np.float32)
    want = base.copy()
    want[idx, np.arange(5)] = src
    same(Tensor(base).scatter(0, Tensor(idx), Tensor(src)), want)
    added = base.copy()
    np.add.at(added, (np.concatenate([idx, idx]), np.broadcast_to(np.arange(5), (4, 5))), np.concatenate([src, src]))
    same(
        Tensor(base).scatter_add(0, Tensor(np.concatenate([idx, idx])), Tensor(np.concatenate([src, src]))),
        added,
        exact=False,
    )
    nines = base.copy()
    nines[[0, 1, 2], [4, 0, 2]] = 9.0
    same(Tensor(base).scatter(1, Tensor(np.array([[4], [0], [2]])), 9.0), nines)
    with pytest.raises(TensorError, match="use scatter_add"):
        Tensor(base).scatter(0, Tensor(np.array([[0, 1, 2, 0, 1], [0, 0, 1, 1, 0]])), Tensor(src))


@pytest.mark.parametrize(
    "index",
    [
        [2, 0, 2],
        (slice(None), [3, -1]),
        (slice(None), [[0, 1], [2, 3]], 1),
        ([0, 2], slice(None), [1, 4]),  # apart: the broadcast axes go first
        ([0, 2], 1, [1, 4]),  # an int between keeps them together, as in numpy
        (Ellipsis, [4, 0]),
        (None, [1], slice(1, 3)),
        (slice(None, None, -1), [0, 0, 0], slice(None, None, 2)),
    ],
    ids=str,
)
def test_integer_array_indexing_as_numpy(index: Any) -> None:
    items = index if isinstance(index, tuple) else (index,)
    as_tensors = tuple(Tensor(np.array(i)) if isinstance(i, list) else i for i in items)
    same(Tensor(A)[index], A[index])
    same(Tensor(A)[as_tensors], A[index])


def test_indexing_follows_pytorch_where_numpy_differs() -> None:
    """x[0, :, [1, 2]]: numpy counts the 0 as an index array, apart from [1, 2], and puts the picked axis
    first; PyTorch and uopc keep it where it was."""
    assert Tensor(A)[0, :, [1, 2]].shape == (4, 2)
    same(Tensor(A)[0, :, [1, 2]], A[0][:, [1, 2]])


def test_bool_masks() -> None:
    same(Tensor(A)[Tensor(A > 0.5)], A[A > 0.5])
    mask = A[:, :, 0] > 0
    same(Tensor(A)[mask], A[mask])
    same(Tensor(A)[:, [True, False, True, True]], A[:, [True, False, True, True]])
    same(Tensor(A)[Tensor(A > 100)], A[A > 100])  # selects nothing: shape (0,)


def test_tril_triu() -> None:
    for k in (-1, 0, 2):
        same(Tensor(A).tril(k), np.tril(A, k))
        same(Tensor(A).triu(k), np.triu(A, k))
    same(Tensor(np.ones((2, 3), bool)).tril(), np.tril(np.ones((2, 3), bool)))
    with pytest.raises(TensorError, match="tril: needs at least 2 dimensions"):
        Tensor([1.0]).tril()


# ---- shapes ----


def test_split_chunk_view_repeat_unflatten() -> None:
    for got, want in zip(Tensor(A).split(2, 2), np.split(A, [2, 4], 2), strict=True):
        same(got, want)
    for got, want in zip(Tensor(A).split([1, 3], 1), np.split(A, [1], 1), strict=True):
        same(got, want)
    assert [t.shape[1] for t in Tensor(A).chunk(3, 1)] == [2, 2]  # 4 in pieces of 2, as torch.chunk
    assert [t.shape[2] for t in Tensor(A).chunk(2, -1)] == [3, 2]
    same(Tensor(A).view(12, 5), A.reshape(12, 5))
    same(Tensor(A).repeat(2, 1, 1, 3), np.tile(A, (2, 1, 1, 3)))
    same(Tensor(A).unflatten(1, (2, -1)), A.reshape(3, 2, 2, 5))
    with pytest.raises(TensorError, match="add up to 4"):
        Tensor(A).split([1, 2], 1)
    with pytest.raises(TensorError, match="do not split dim 1"):
        Tensor(A).unflatten(1, (3, -1))
    with pytest.raises(TensorError, match="view: reinterpreting"):
        Tensor(A).view(cast(Any, dtypes.int32))


# ---- sampling ----


def test_multinomial_draws_in_proportion_and_repeats_with_the_seed() -> None:
    weights = np.array([[1.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 5.0]], np.float32)
    Tensor.manual_seed(3)
    draws = Tensor(weights).multinomial(4000, replacement=True).numpy()
    Tensor.manual_seed(3)
    np.testing.assert_array_equal(Tensor(weights).multinomial(4000, replacement=True).numpy(), draws)
    for row, w in zip(draws, weights, strict=True):
        counts = np.bincount(row, minlength=4)
        expected = 4000 * w / w.sum()
        assert (counts[w == 0] == 0).all()  # a category of weight 0 is never drawn
        assert (np.abs(counts - expected) < 5 * np.sqrt(expected + 1)).all(), (counts, expected)


def test_multinomial_without_replacement() -> None:
    """Gumbel keys: the first draw is distributed as the weights, and no category comes twice."""
    Tensor.manual_seed(4)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    firsts = np.array([Tensor(w).multinomial(3).numpy() for _ in range(600)])
    assert all(len(set(row)) == 3 for row in firsts.tolist())
    counts = np.bincount(firsts[:, 0], minlength=4)
    assert (np.abs(counts - 600 * w / w.sum()) < 5 * np.sqrt(600 * w / w.sum())).all(), counts
    with pytest.raises(TensorError, match="fewer categories"):
        Tensor([1.0, 0.0, 1.0]).multinomial(3)
    with pytest.raises(TensorError, match="finite, >= 0"):
        Tensor([1.0, -1.0]).multinomial(1)


# ---- losses ----


def log_softmax(x: Array) -> Array:
    m = x.max(-1, keepdims=True)
    return np.asarray(x - m - np.log(np.exp(x - m).sum(-1, keepdims=True)))


def test_cross_entropy_options_match_their_formulas() -> None:
    logits = RNG.standard_normal((6, 4))
    labels = np.array([0, 3, 1, -100, 2, 1])
    logp = log_softmax(logits)
    kept = labels != -100
    nll = -np.where(kept, logp[np.arange(6), np.where(kept, labels, 0)], 0)
    smooth = np.where(kept, -logp.mean(-1), 0)
    x, y = Tensor(logits), Tensor(labels)
    np.testing.assert_allclose(x.cross_entropy(y).numpy(), nll.sum() / kept.sum(), rtol=1e-12)
    np.testing.assert_allclose(x.cross_entropy(y, reduction="none").numpy(), nll, rtol=1e-12)
    np.testing.assert_allclose(x.cross_entropy(y, reduction="sum").numpy(), nll.sum(), rtol=1e-12)
    got = x.cross_entropy(y, label_smoothing=0.3).numpy()
    np.testing.assert_allclose(got, (0.7 * nll + 0.3 * smooth).sum() / kept.sum(), rtol=1e-12)
    probs = np.exp(log_softmax(RNG.standard_normal((6, 4))))
    np.testing.assert_allclose(x.cross_entropy(Tensor(probs)).numpy(), -(probs * logp).sum(-1).mean(), rtol=1e-12)
    np.testing.assert_allclose(Tensor(logp).nll_loss(y, reduction="sum").numpy(), nll.sum(), rtol=1e-12)
    assert math.isnan(x.cross_entropy(Tensor(np.full(6, -100))).item())  # nothing counted: 0 / 0, as torch
    with pytest.raises(TensorError, match="reduction must be"):
        x.cross_entropy(y, reduction="avg")
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\)"):
        x.cross_entropy(Tensor([0, 4, 0, 0, 0, 0]))


def test_binary_cross_entropies() -> None:
    z = np.array([-200.0, -3.0, 0.0, 0.5, 40.0])
    y = np.array([1.0, 0.0, 0.5, 1.0, 0.0])
    p = sigmoid(z)
    with np.errstate(divide="ignore"):
        clamped = -(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log1p(-p), -100))
    got = Tensor(p).binary_cross_entropy(Tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(got, clamped, rtol=1e-12)  # log(0) is clamped at -100: finite
    with_logits = np.logaddexp(0, z) - z * y
    got = Tensor(z).binary_cross_entropy_with_logits(Tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(got, with_logits, rtol=1e-12)
    np.testing.assert_allclose(Tensor(z).binary_cross_entropy_with_logits(Tensor(y)).numpy(), with_logits.mean())


def grads(f: Callable[[Tensor], Tensor], values: list[float]) -> Array:
    x = Tensor(np.array(values, np.float64), requires_grad=True)
    f(x).sum().backward()
    assert x.grad is not None
    return x.grad.numpy()


def test_gradients_at_corners_infinities_and_nan_are_pytorchs() -> None:
    """Where a piecewise function has a corner, PyTorch picks a side, and uopc takes the same one; at inf a
    piece that `where` did not choose must not send 0 * inf = NaN back (hardswish's middle piece did), and
    at 0 elu's lower piece must not go through minimum, whose tie rule halved its gradient."""
    np.testing.assert_array_equal(grads(lambda t: t.elu(0.5), [0.0, -inf, nan]), [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(grads(Tensor.hardswish, [-inf, -3.0, 3.0, inf]), [0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(grads(lambda t: t.clip(-1.0, 1.0), [-1.0, 1.0, 2.0, nan]), [1, 1, 0, 0])
    np.testing.assert_array_equal(grads(Tensor.relu6, [0.0, 6.0, 3.0]), [0, 0, 1])
    np.testing.assert_array_equal(grads(lambda t: t.leaky_relu(0.1), [0.0, nan]), [0.1, 0.1])
    np.testing.assert_allclose(grads(Tensor.softplus, [0.0, -inf, inf, -800.0]), [0.5, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(grads(Tensor.gelu, [-inf, inf]), [0.0, 1.0])


def index_arithmetic(t: Tensor) -> int:
    """Integer divisions and remainders in the program of the largest kernel that computes t: the cost of
    its index arithmetic, which the C compiler cannot hoist out of the inner loops."""
    graph, _ = normalize([t.uop])
    program = max((linearize(k) for k in make_plan(graph).kernels), key=lambda p: p.flops)
    return sum(1 for u in program.uops if u.op in (Ops.IDIV, Ops.MOD))


def test_a_convolution_reads_a_computed_input_as_simply_as_a_loaded_one() -> None:
    """The CNN's second convolution reads the first pooling's output. Read through its reduction's shape,
    its loads took 28 divisions and remainders where the same convolution of a loaded image takes 8, and the
    kernel ran four times slower; conv2d now computes a lazy input into a buffer of its own first."""
    x = RNG.standard_normal((2, 1, 28, 28)).astype(np.float32)  # the CNN's shapes
    w1, w2 = (Tensor(RNG.standard_normal(s).astype(np.float32)) for s in [(8, 1, 3, 3), (16, 8, 3, 3)])
    pooled = Tensor(x).conv2d(w1, padding=1).relu().max_pool2d(2)  # lazy, as inside a model
    loaded = Tensor(Tensor(x).conv2d(w1, padding=1).relu().max_pool2d(2).numpy())
    assert index_arithmetic(pooled.conv2d(w2, padding=1)) == index_arithmetic(loaded.conv2d(w2, padding=1))


def test_the_gradient_of_a_convolution_input_is_a_product_and_a_sum_of_shifts() -> None:
    """The CNN's second convolution backward. Through a window view, the input's gradient was one reduction
    that ran the overlapping tiles backwards (100 divisions and remainders, 0.6 s of a 1.1 s step); through
    an im2col buffer it is a matrix product into a buffer and kH kW shifted slices of it added up."""
    x = Tensor(RNG.standard_normal((2, 8, 14, 14)).astype(np.float32), requires_grad=True)
    w = Tensor(RNG.standard_normal((16, 8, 3, 3)).astype(np.float32), requires_grad=True)
    x.conv2d(w, padding=1).square().sum().backward()
    assert x.grad is not None and w.grad is not None
    assert index_arithmetic(x.grad) <= 8 and index_arithmetic(w.grad) <= 8


def test_the_gradient_of_a_convolutions_columns_is_a_packed_matmul() -> None:
    """d columns = W^T d out has N H_out W_out columns (here 16 * 196, a multiple of the panel's 64). Made in
    the (C, kH kW, N, H_out, W_out) shape of the im2col buffer, its innermost axis had 14 and no panels;
    made in the matrix's shape, Chapter 13's packed kernel computes it."""
    x = Tensor(RNG.standard_normal((16, 8, 14, 14)).astype(np.float32), requires_grad=True)
    w = Tensor(RNG.standard_normal((16, 8, 3, 3)).astype(np.float32))
    (x.conv2d(w, padding=1) * Tensor(RNG.standard_normal((16, 16, 14, 14)).astype(np.float32))).sum().backward()
    assert x.grad is not None
    graph, _ = normalize([x.grad.uop])
    assert len(make_plan(graph, pack=1).kernels) > len(make_plan(graph, pack=0).kernels)


def test_convolution_pooling_and_attention_refuse_what_does_not_fit() -> None:
    x, w = Tensor(np.zeros((1, 4, 5, 5), np.float32)), Tensor(np.zeros((6, 2, 3, 3), np.float32))
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: x.conv2d(w), "do not fit groups=1"),
        (lambda: x.conv2d(w, groups=2, bias=Tensor(np.zeros(4, np.float32))), "bias must have shape (6,)"),
        (lambda: x.conv2d(Tensor(np.zeros((6, 4, 7, 7), np.float32))), "a window of 7 (dilation 1)"),
        (lambda: x.conv2d(w, groups=2, padding="same", stride=2), "padding='same' needs stride 1"),
        (lambda: x.conv2d(w, groups=2, stride=0), "stride must be a positive integer"),
        (lambda: x[0, 0].conv2d(w), "needs images (N, C, H, W) or (C, H, W)"),
        (lambda: x.max_pool2d(2, padding=2), "at most half the kernel"),
        (lambda: x.scaled_dot_product_attention(x, x, Tensor([True]), is_causal=True), "not both"),
    ]
    for call, fragment in cases:
        with pytest.raises(TensorError, match=re.escape(fragment)):
            call()
    one_image = Tensor(A).conv2d(Tensor(np.ones((2, 3, 1, 1), np.float32)))
    same(one_image, np.stack([A.sum(0)] * 2), exact=False)


def test_max_pool_sends_the_gradient_to_the_first_largest_element() -> None:
    """As PyTorch does; the max reduction's own rule would share it among ties (a window of ReLU zeros).
    (float32: gcc 12.2 crashes vectorizing this argmax kernel in float64, for a 2 x 4 image.)"""
    x = Tensor(np.array([[[[0.0, 0.0, 1.0, 3.0], [0.0, 0.0, 3.0, 2.0]]]], np.float32), requires_grad=True)
    x.max_pool2d(2).sum().backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [[[[1, 0, 0, 1], [0, 0, 0, 0]]]])


def test_cross_entropy_checks_its_targets_without_a_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Class targets are data, checked when the loss is built; targets loaded from numpy are read as they
    are. Checking `where(target != ignore_index, target, 0)` instead computed it: a plan of its own and a
    kernel run on every training step (notebook entry 82)."""
    logits = Tensor(RNG.standard_normal((4, 3)).astype(np.float32))
    targets = Tensor(np.array([0, 2, -100, 1], np.int32))
    computed: list[object] = []

    def counted(roots: Any, device: str) -> Any:
        computed.append(roots)
        return realize(roots, device)

    monkeypatch.setattr("uopc.tensor.tensor.realize", counted)
    loss = logits.cross_entropy(targets)
    assert computed == []
    want = -np.log(np.exp(logits.numpy()) / np.exp(logits.numpy()).sum(-1, keepdims=True))[[0, 1, 3], [0, 2, 1]]
    same(loss, want.mean(), exact=False)
    with pytest.raises(TensorError, match=r"indices must lie in \[0, 3\), got values from 0 to 3"):
        logits.cross_entropy(Tensor(np.array([0, 3, -100, 1], np.int32)))


def test_logsumexp_sends_no_gradient_to_finite_elements_beside_an_infinity() -> None:
    """The value is inf, and PyTorch's gradient exp(x - inf) is 0 for every finite x. Shifted by 0 (the
    fallback for an infinite maximum), a finite element large enough for exp to overflow got inf / inf = NaN
    (notebook entry 83)."""
    np.testing.assert_array_equal(grads(lambda t: t.logsumexp(0), [1000.0, inf, 1.0]), [0.0, nan, 0.0])
    np.testing.assert_array_equal(grads(lambda t: t.logsumexp(0), [-inf, -inf]), [nan, nan])  # as PyTorch
