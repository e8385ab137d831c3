"""Gradients against finite differences, and the semantics of backward(), detach() and no_grad().

The oracle is calculus: each case is written twice, once with Tensor ops and once with numpy, and the numpy
version is differentiated by central differences in float64, element by element. The loss is a weighted sum
of the output with fixed random weights, so every output element sends back a different gradient: a
gradient routed to the wrong element (a bad permute or flip rule) changes the answer, as a plain sum would
not notice. Inputs avoid the points where an op is not differentiable (ties for max, 0 for relu and abs)
by construction.

Tolerances: the oracle's truncation error is O(eps^2) and its rounding error ~1e-16 / eps, both far below
float32's; the tensor side computes in float32, with error growing with the length of the reductions it
sums over. A missing factor of 2 (a 100% error) or a wrong sign is far outside them;
test_a_mutated_rule_is_caught shows it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.ir import Ops
from uopc.tensor import Tensor, dtypes
from uopc.tensor.autodiff import GRADIENT_RULES, GradRule

Array = npt.NDArray[Any]
Inputs = Callable[[np.random.Generator], list[Array]]


# ---- the oracle ----


def numgrad(f: Callable[[list[Array]], float], xs: list[Array], which: int, eps: float = 1e-3) -> Array:
    """d f / d xs[which] by central differences in float64, one element at a time."""
    base = [x.astype(np.float64) for x in xs]
    g = np.zeros(base[which].shape, np.float64)
    for i in np.ndindex(*base[which].shape):
        plus, minus = [b.copy() for b in base], [b.copy() for b in base]
        plus[which][i] += eps
        minus[which][i] -= eps
        g[i] = (f(plus) - f(minus)) / (2 * eps)
    return g


@dataclass(frozen=True)
class Case:
    """One differentiable function, as Tensor ops and as numpy, with a recipe for safe inputs."""

    name: str
    f: Callable[..., Tensor]
    ref: Callable[..., Any]  # returns an array (or a numpy scalar)
    inputs: Inputs
    reduce_len: int = 1  # the longest sum the gradient goes through: float32 error grows with it

    def __str__(self) -> str:
        return self.name


def gradients_agree(case: Case, seed: int = 0) -> None:
    """Raise AssertionError unless the Tensor gradients of the weighted-sum loss match finite differences."""
    rng = np.random.default_rng(seed)
    xs = case.inputs(rng)
    out_shape = np.shape(case.ref(*[x.astype(np.float64) for x in xs]))
    weights = rng.uniform(0.5, 1.5, out_shape) * rng.choice([-1.0, 1.0], out_shape)

    def loss(values: list[Array]) -> float:
        return float((case.ref(*values) * weights).sum())

    leaves = [Tensor(x, requires_grad=True) for x in xs]
    out = case.f(*leaves)
    assert out.shape == out_shape, f"{case.name}: output shape {out.shape}, numpy says {out_shape}"
    (out * Tensor(weights.astype(np.float32))).sum().backward()
    grads = [leaf.grad for leaf in leaves]
    assert all(g is not None for g in grads), f"{case.name}: a leaf got no gradient"
    Tensor.realize(*(g for g in grads if g is not None))
    for k, (x, g) in enumerate(zip(xs, grads, strict=True)):
        assert g is not None
        want = numgrad(loss, xs, k)
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(
            g.numpy(),
            want,
            rtol=2e-3,
            atol=1e-4 * scale * math.sqrt(case.reduce_len),
            err_msg=f"{case.name}: gradient of input {k} (shape {x.shape})",
        )


# ---- input recipes ----


def normal(*shapes: tuple[int, ...]) -> Inputs:
    return lambda rng: [rng.standard_normal(s).astype(np.float32) for s in shapes]


def positive(*shapes: tuple[int, ...]) -> Inputs:
    return lambda rng: [rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes]


def away_from_zero(*shapes: tuple[int, ...]) -> Inputs:
    """|x| >= 0.2: far from the kink of relu and abs, for an eps of 1e-3."""
    return lambda rng: [(rng.uniform(0.2, 2.0, s) * rng.choice([-1, 1], s)).astype(np.float32) for s in shapes]


def distinct(*shapes: tuple[int, ...]) -> Inputs:
    """Values at least 0.1 apart, in random order: no ties for max and min."""

    def make(rng: np.random.Generator) -> list[Array]:
        out = []
        for s in shapes:
            n = math.prod(s)
            out.append(((rng.permutation(n) - n / 2) * 0.1 + rng.uniform(0, 0.01, n)).reshape(s).astype(np.float32))
        return out

    return make


def apart(shape: tuple[int, ...]) -> Inputs:
    """Two arrays that differ by at least 0.2 everywhere: maximum and minimum never tie."""

    def make(rng: np.random.Generator) -> list[Array]:
        a = rng.standard_normal(shape)
        gap = rng.uniform(0.2, 1.0, shape) * rng.choice([-1, 1], shape)
        return [a.astype(np.float32), (a + gap).astype(np.float32)]

    return make


def joined(*recipes: Inputs) -> Inputs:
    return lambda rng: [x for r in recipes for x in r(rng)]


# ---- numpy versions of the composite functions ----


def sigmoid(x: Array) -> Array:
    return 1 / (1 + np.exp(-x))


def gelu_erf(x: Array) -> Array:
    """Exact GELU, x P(X <= x) for a standard normal X, with the C library's erf."""
    return np.asarray(0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))


def gelu_tanh(x: Array) -> Array:
    return np.asarray(0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))))


def log_softmax(x: Array, axis: int = -1) -> Array:
    m = x.max(axis=axis, keepdims=True)
    return np.asarray(x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True)))


def pad_ref(a: Array, widths: list[tuple[int, int]], value: float) -> Array:
    cut = a[tuple(slice(max(0, -b), s - max(0, -e)) for (b, e), s in zip(widths, a.shape, strict=True))]
    return np.pad(cut, [(max(0, b), max(0, e)) for b, e in widths], constant_values=value)


def avoiding(shape: tuple[int, ...], *kinks: float, low: float = -4.0, high: float = 4.0) -> Inputs:
    """Uniform values at least 0.05 from each kink (where a piecewise function has a corner)."""

    def make(rng: np.random.Generator) -> list[Array]:
        x = rng.uniform(low, high, shape)
        for k in kinks:
            x = np.where(np.abs(x - k) < 0.05, k + 0.1 * np.sign(x - k + 1e-9), x)
        return [x.astype(np.float32)]

    return make


def conv2d_ref(x: Array, w: Array, b: Array, stride: int, padding: int, dilation: int, groups: int) -> Array:
    """Convolution by its definition: a loop over output positions, one einsum per group."""
    x = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    n, _, h, width = x.shape
    out_c, per_group, kh, kw = w.shape
    oh, ow = (h - dilation * (kh - 1) - 1) // stride + 1, (width - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, out_c, oh, ow), np.result_type(x, w))
    step = out_c // groups
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * stride, i * stride + dilation * (kh - 1) + 1, dilation)
            cols = slice(j * stride, j * stride + dilation * (kw - 1) + 1, dilation)
            for g in range(groups):
                patch = x[:, g * per_group : (g + 1) * per_group, rows, cols]
                weights = w[g * step : (g + 1) * step]
                out[:, g * step : (g + 1) * step, i, j] = np.einsum("nchw,ochw->no", patch, weights)
    return out + b.reshape(1, -1, 1, 1)


def pool_ref(x: Array, k: int, stride: int, reduce: Callable[..., Array]) -> Array:
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(x[:, :, i * stride : i * stride + k, j * stride : j * stride + k], axis=(2, 3))
    return out


def attention_ref(q: Array, k: Array, v: Array) -> Array:
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    return np.asarray(np.exp(log_softmax(scores)) @ v)


def scatter_add_ref(a: Array, b: Array) -> Array:
    """a with b[i, j, k] added to a[i, IDX[i, j, k], k]."""
    out = a.copy()
    i, _, k = np.indices(IDX.shape)
    np.add.at(out, (i, IDX, k), b)
    return out


def erf_ref(x: Array) -> Array:
    return np.asarray(np.vectorize(math.erf)(x))


def softplus_ref(x: Array) -> Array:
    return np.asarray(np.logaddexp(0, x))


COND = np.random.default_rng(99).random((2, 3, 5)) < 0.5
LABELS = np.random.default_rng(98).integers(0, 5, (2, 3)).astype(np.int32)
PAD = [(1, 0), (-1, 2), (0, -2)]
IDX = np.random.default_rng(97).integers(0, 3, (2, 4, 5))  # repeats: their gradients add up
TARGETS = np.array([[0, 4, 1], [-100, 2, 2]])
PROBS = np.exp(log_softmax(np.random.default_rng(96).standard_normal((2, 3, 5))))
BINARY = np.random.default_rng(95).uniform(0, 1, (2, 3, 5))

CASES: list[Case] = [
    # arithmetic, broadcasting both ways, scalars on either side
    Case("add", lambda a, b: a + b, lambda a, b: a + b, normal((2, 3, 5), (1, 3, 1)), 10),
    Case("sub", lambda a, b: a - b, lambda a, b: a - b, normal((4, 1, 5), (3, 1)), 20),
    Case("mul", lambda a, b: a * b, lambda a, b: a * b, normal((2, 3, 5), (1, 3, 1)), 10),
    Case("div", lambda a, b: a / b, lambda a, b: a / b, joined(normal((2, 3, 5)), positive((1, 3, 1))), 10),
    Case("neg", lambda a: -a, lambda a: -a, normal((2, 3, 5))),
    Case(
        "scalars",
        lambda a: (3.0 - a) * 1.5 + 2.0 / (a + 4.0),
        lambda a: (3 - a) * 1.5 + 2 / (a + 4),
        positive((4, 1, 5)),
    ),
    Case("pow", lambda a, b: a**b, lambda a, b: a**b, joined(positive((2, 3, 5)), normal((1, 3, 1))), 10),
    Case("pow_float", lambda a: a**2.5, lambda a: a**2.5, positive((2, 3, 5))),
    Case("pow_int", lambda a: a**3 + a**-1, lambda a: a**3 + a**-1.0, positive((2, 3, 5))),
    Case("rpow", lambda a: 2.0**a, lambda a: 2.0**a, normal((2, 3, 5))),
    Case("maximum", lambda a, b: a.maximum(b), np.maximum, apart((2, 3, 5))),
    Case("minimum", lambda a, b: a.minimum(b), np.minimum, apart((2, 3, 5))),
    Case("maximum_scalar", lambda a: a.maximum(0.0), lambda a: np.maximum(a, 0), away_from_zero((2, 3, 5))),
    Case(
        "where",
        lambda a, b: Tensor(COND).where(a, b),
        lambda a, b: np.where(COND, a, b),
        normal((2, 3, 5), (1, 3, 1)),
        10,
    ),
    Case("where_scalar", lambda a: Tensor(COND).where(a, 0.5), lambda a: np.where(COND, a, 0.5), normal((2, 3, 5))),
    # unary functions
    Case("exp", Tensor.exp, np.exp, normal((2, 3, 5))),
    Case("log", Tensor.log, np.log, positive((2, 3, 5))),
    Case("sqrt", Tensor.sqrt, np.sqrt, positive((2, 3, 5))),
    Case("rsqrt", Tensor.rsqrt, lambda a: 1 / np.sqrt(a), positive((2, 3, 5))),
    Case("sin", Tensor.sin, np.sin, normal((2, 3, 5))),
    Case("cos", Tensor.cos, np.cos, normal((2, 3, 5))),
    Case("abs", Tensor.abs, np.abs, away_from_zero((2, 3, 5))),
    Case("sigmoid", Tensor.sigmoid, sigmoid, normal((2, 3, 5))),
    Case("tanh", Tensor.tanh, np.tanh, normal((2, 3, 5))),
    Case("relu", Tensor.relu, lambda a: np.maximum(a, 0), away_from_zero((2, 3, 5))),
    Case("gelu", Tensor.gelu, gelu_erf, normal((2, 3, 5))),
    Case("gelu_tanh", lambda a: a.gelu("tanh"), gelu_tanh, normal((2, 3, 5))),
    Case("silu", Tensor.silu, lambda a: a * sigmoid(a), normal((2, 3, 5))),
    Case("square", Tensor.square, np.square, normal((2, 3, 5))),
    # reductions
    Case("sum", lambda a: a.sum(), lambda a: np.asarray(a.sum()), normal((2, 3, 5)), 30),
    Case(
        "sum_axes", lambda a: a.sum((0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdims=True), normal((2, 3, 5)), 10
    ),
    Case("sum_axis", lambda a: a.sum(-1), lambda a: a.sum(-1), normal((4, 1, 5)), 5),
    Case("max", lambda a: a.max(1), lambda a: a.max(1), distinct((2, 3, 5))),
    Case("max_all", lambda a: a.max(), lambda a: np.asarray(a.max()), distinct((2, 3, 5))),
    Case("min", lambda a: a.min((0, 2), keepdim=True), lambda a: a.min((0, 2), keepdims=True), distinct((2, 3, 5))),
    Case("mean", lambda a: a.mean(0), lambda a: a.mean(0), normal((4, 1, 5)), 4),
    Case("var", lambda a: a.var(-1), lambda a: a.var(-1, ddof=1), normal((2, 3, 5)), 5),
    Case("var_all", lambda a: a.var(), lambda a: np.asarray(a.var(ddof=1)), normal((2, 3, 5)), 30),
    Case("std", lambda a: a.std(1, keepdim=True), lambda a: a.std(1, keepdims=True, ddof=1), normal((2, 3, 5)), 3),
    Case("std_biased", lambda a: a.std(correction=0), lambda a: np.asarray(a.std()), normal((2, 3, 5)), 30),
    Case(
        "logsumexp",
        lambda a: a.logsumexp(1),
        lambda a: np.log(np.exp(a).sum(1)),
        normal((2, 3, 5)),
        3,
    ),
    Case("softmax", lambda a: a.softmax(), lambda a: np.exp(log_softmax(a)), normal((2, 3, 5)), 5),
    Case("softmax_axis0", lambda a: a.softmax(0), lambda a: np.exp(log_softmax(a, 0)), normal((4, 1, 5)), 4),
    Case("log_softmax", lambda a: a.log_softmax(), log_softmax, normal((2, 3, 5)), 5),
    Case(
        "cross_entropy",
        lambda a: a.cross_entropy(Tensor(LABELS)),
        lambda a: np.asarray(-np.take_along_axis(log_softmax(a), LABELS[..., None], -1).mean()),
        normal((2, 3, 5)),
        30,
    ),
    # movement
    Case("reshape", lambda a: a.reshape(5, -1), lambda a: a.reshape(5, -1), normal((2, 3, 5))),
    Case("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), normal((2, 3, 5))),
    Case("permute_cube", lambda a: a.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0), normal((3, 3, 3))),
    Case("transpose", lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2), normal((4, 1, 5))),
    Case("T", lambda a: a.T, lambda a: a.T, normal((2, 3, 5))),
    Case("expand", lambda a: a.expand(4, 3, 5), lambda a: np.broadcast_to(a, (4, 3, 5)), normal((1, 3, 1)), 20),
    Case("pad", lambda a: a.pad(PAD, 2.0), lambda a: pad_ref(a, PAD, 2.0), normal((2, 3, 5))),
    Case("shrink", lambda a: a.shrink([(1, 3), None, (2, 5)]), lambda a: a[1:3, :, 2:5], normal((4, 1, 5))),
    Case("flip", lambda a: a.flip((0, 2)), lambda a: a[::-1, :, ::-1], normal((2, 3, 5))),
    Case("index", lambda a: a[1, ::-2, None, 3:0:-2], lambda a: a[1, ::-2, None, 3:0:-2], normal((2, 3, 5))),
    Case("index_step", lambda a: a[..., ::3], lambda a: a[..., ::3], normal((4, 1, 5))),
    Case(
        "squeeze_unsqueeze_flatten",
        lambda a: a.squeeze().unsqueeze(0).flatten(),
        lambda a: a.squeeze()[None].reshape(-1),
        normal((1, 3, 1)),
    ),
    Case(
        "cat",
        lambda a, b: Tensor.cat(a, b * 2, a, dim=1),
        lambda a, b: np.concatenate([a, b * 2, a], 1),
        normal((2, 3, 5), (2, 1, 5)),
    ),
    Case("stack", lambda a, b: Tensor.stack([a, b], dim=-1), lambda a, b: np.stack([a, b], -1), normal((3, 5), (3, 5))),
    # matrix products
    Case("matmul", lambda a, b: a @ b, lambda a, b: a @ b, normal((3, 5), (5, 4)), 5),
    Case("matmul_batched", lambda a, b: a @ b, lambda a, b: a @ b, normal((2, 3, 5), (5, 4)), 10),
    Case("matmul_broadcast", lambda a, b: a.matmul(b), lambda a, b: a @ b, normal((4, 1, 3, 5), (2, 5, 3)), 20),
    Case("matmul_vector", lambda a, b: a @ b, lambda a, b: a @ b, normal((5,), (2, 5, 4)), 10),
    Case("dot", lambda a, b: a.dot(b), lambda a, b: np.asarray(a @ b), normal((7,), (7,)), 7),
    # identities, casts and a small network
    Case("cast", lambda a: (a.cast(dtypes.float64) * 3).cast(dtypes.float32), lambda a: a * 3, normal((2, 3, 5))),
    Case(
        "contiguous",
        lambda a: (a * a).contiguous().permute(1, 0, 2),
        lambda a: (a * a).transpose(1, 0, 2),
        normal((2, 3, 5)),
    ),
    Case("detach", lambda a: a * a.detach(), lambda a: a * a, normal((2, 3, 5))),  # see below: d/da is a, not 2a
    # the ops people port scripts with (issue 11)
    Case("clip", lambda a: a.clip(-0.5, 0.7), lambda a: np.clip(a, -0.5, 0.7), avoiding((2, 3, 5), -0.5, 0.7)),
    Case("erf", Tensor.erf, erf_ref, lambda rng: [rng.uniform(-4, 4, (2, 3, 5)).astype(np.float32)]),
    Case("log2", Tensor.log2, np.log2, positive((2, 3, 5))),
    Case("exp2", Tensor.exp2, np.exp2, normal((2, 3, 5))),
    Case("leaky_relu", lambda a: a.leaky_relu(0.1), lambda a: np.where(a > 0, a, 0.1 * a), away_from_zero((2, 3, 5))),
    Case("elu", Tensor.elu, lambda a: np.where(a > 0, a, np.expm1(np.minimum(a, 0))), away_from_zero((2, 3, 5))),
    Case("softplus", Tensor.softplus, softplus_ref, lambda rng: [rng.uniform(-25, 25, (2, 3, 5)).astype(np.float32)]),
    Case(
        "softplus_beta",
        lambda a: a.softplus(2.0, 1.0),
        lambda a: np.where(2 * a > 1, a, softplus_ref(2 * a) / 2),
        avoiding((2, 3, 5), 0.5),
    ),
    Case("relu6", Tensor.relu6, lambda a: np.clip(a, 0, 6), avoiding((2, 3, 5), 0.0, 6.0, low=-2, high=8)),
    Case("hardswish", Tensor.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6, avoiding((2, 3, 5), -3.0, 3.0)),
    Case("prod", lambda a: a.prod(1), lambda a: a.prod(1), normal((2, 3, 5))),
    Case("prod_all", lambda a: a.prod(), lambda a: np.asarray(a.prod()), positive((2, 3, 2))),
    Case("cumsum", lambda a: a.cumsum(2), lambda a: np.cumsum(a, 2), normal((2, 3, 5)), 5),
    Case("gather", lambda a: a.gather(1, Tensor(IDX)), lambda a: np.take_along_axis(a, IDX, 1), normal((2, 3, 5)), 4),
    Case(
        "scatter_add",
        lambda a, b: a.scatter_add(1, Tensor(IDX), b),
        scatter_add_ref,
        normal((2, 3, 5), (2, 4, 5)),
    ),
    Case("index_tensor", lambda a: a[:, Tensor(IDX[0])], lambda a: a[:, IDX[0]], normal((2, 3, 5)), 4),
    Case("index_lists", lambda a: a[[1, 0, 1], :, [4, 4, 0]], lambda a: a[[1, 0, 1], :, [4, 4, 0]], normal((2, 3, 5))),
    Case(
        "masked_fill",
        lambda a: a.masked_fill(Tensor(COND), 2.0),
        lambda a: np.where(COND, 2.0, a),
        normal((2, 3, 5)),
    ),
    Case("tril", lambda a: a.tril(-1), lambda a: np.tril(a, -1), normal((2, 3, 5))),
    Case("sort", lambda a: a.sort(2, descending=True)[0], lambda a: -np.sort(-a, 2), distinct((2, 3, 5)), 5),
    Case("topk", lambda a: a.topk(2, 1)[0], lambda a: -np.sort(-a, 1)[:, :2], distinct((2, 3, 5)), 3),
    Case("repeat", lambda a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), normal((2, 3, 5)), 6),
    Case("split", lambda a: a.split([2, 3], -1)[1] * 2, lambda a: a[..., 2:] * 2, normal((2, 3, 5))),
    Case(
        "cross_entropy_options",
        lambda a: a.cross_entropy(Tensor(TARGETS), reduction="sum", label_smoothing=0.2),
        lambda a: np.asarray(
            -np.where(
                TARGETS != -100,
                0.8 * np.take_along_axis(log_softmax(a), np.maximum(TARGETS, 0)[..., None], -1)[..., 0]
                + 0.2 * log_softmax(a).mean(-1),
                0,
            ).sum()
        ),
        normal((2, 3, 5)),
        15,
    ),
    Case(
        "cross_entropy_probabilities",
        lambda a: a.cross_entropy(Tensor(PROBS)),
        lambda a: np.asarray(-(PROBS * log_softmax(a)).sum(-1).mean()),
        normal((2, 3, 5)),
        30,
    ),
    Case(
        "binary_cross_entropy",
        lambda a: a.sigmoid().binary_cross_entropy(Tensor(BINARY)),
        lambda a: np.asarray(-(BINARY * np.log(sigmoid(a)) + (1 - BINARY) * np.log(1 - sigmoid(a))).mean()),
        normal((2, 3, 5)),
        30,
    ),
    Case(
        "binary_cross_entropy_with_logits",
        lambda a: a.binary_cross_entropy_with_logits(Tensor(BINARY), reduction="none"),
        lambda a: softplus_ref(a) - a * BINARY,
        lambda rng: [rng.uniform(-30, 30, (2, 3, 5)).astype(np.float32)],
    ),
    Case(
        "conv2d",
        lambda x, w, b: x.conv2d(w, b, stride=2, padding=1, groups=2),
        lambda x, w, b: conv2d_ref(x, w, b, 2, 1, 1, 2),
        normal((2, 4, 5, 6), (6, 2, 3, 2), (6,)),
        12,
    ),
    Case(
        "conv2d_dilated",
        lambda x, w, b: x.conv2d(w, b, dilation=2),
        lambda x, w, b: conv2d_ref(x, w, b, 1, 0, 2, 1),
        normal((1, 3, 6, 5), (2, 3, 2, 2), (2,)),
        12,
    ),
    Case("max_pool2d", lambda x: x.max_pool2d(2), lambda x: pool_ref(x, 2, 2, np.max), distinct((2, 3, 4, 6))),
    Case(
        "max_pool2d_overlapping",
        lambda x: x.max_pool2d(3, 1),
        lambda x: pool_ref(x, 3, 1, np.max),
        distinct((1, 2, 5, 4)),
    ),
    Case("avg_pool2d", lambda x: x.avg_pool2d(3, 2), lambda x: pool_ref(x, 3, 2, np.mean), normal((2, 3, 7, 5)), 9),
    Case(
        "scaled_dot_product_attention",
        lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
        attention_ref,
        normal((2, 4, 3), (2, 4, 3), (2, 4, 5)),
        4,
    ),
    Case(
        "mlp",
        lambda x, w1, w2: ((x @ w1).relu() @ w2).log_softmax(),
        lambda x, w1, w2: log_softmax(np.maximum(x @ w1, 0) @ w2),
        joined(normal((4, 6)), lambda rng: [rng.standard_normal((6, 5)).astype(np.float32)], normal((5, 3))),
        6,
    ),
]


@pytest.mark.sanitize
@pytest.mark.parametrize("case", [c for c in CASES if c.name != "detach"], ids=str)
def test_gradient_matches_finite_differences(case: Case) -> None:
    gradients_agree(case)


def test_detach_stops_the_gradient() -> None:
    """d/da of a * detach(a) is detach(a) alone: the finite-difference oracle (which moves both) says 2a."""
    case = next(c for c in CASES if c.name == "detach")
    with pytest.raises(AssertionError):
        gradients_agree(case)
    a = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    x = Tensor(a, requires_grad=True)
    (x * x.detach()).sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), a, rtol=1e-6)


# ---- testing the tests: a gradient rule with a bug must fail them ----


@contextlib.contextmanager
def mutated_rule(op: Ops, rule: GradRule) -> Iterator[None]:
    """Replace the gradient rule for `op` inside the block; the original comes back however the block ends."""
    original = GRADIENT_RULES[op]
    GRADIENT_RULES[op] = rule
    try:
        yield
    finally:
        GRADIENT_RULES[op] = original


MUTANTS: dict[str, tuple[Ops, GradRule, str]] = {
    "sqrt without its factor 2": (Ops.SQRT, lambda u, g: (g / u,), "sqrt"),
    "sub with the wrong sign": (Ops.SUB, lambda u, g: (g, g), "sub"),
    "exp with the wrong sign": (Ops.EXP, lambda u, g: (-g * u,), "exp"),
    "max reduce to every element": (
        Ops.REDUCE_AXIS,
        lambda u, g: (g.expand(u.src[0].shape),),
        "max",
    ),
    "permute not inverted": (Ops.PERMUTE, lambda u, g: (g.permute(u.arg),), "permute_cube"),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_a_mutated_rule_is_caught(mutant: str) -> None:
    op, rule, name = MUTANTS[mutant]
    case = next(c for c in CASES if c.name == name)
    gradients_agree(case)  # the real rule passes
    with mutated_rule(op, rule), pytest.raises(AssertionError):
        gradients_agree(case)
    assert GRADIENT_RULES[op] is not rule
    gradients_agree(case)  # and passes again once restored


# ---- backward(), .grad, detach() and no_grad() ----


def leaf(seed: int = 0, shape: tuple[int, ...] = (2, 3)) -> tuple[Tensor, Array]:
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return Tensor(a, requires_grad=True), a


def grad_of(t: Tensor) -> Array:
    assert t.grad is not None, "no gradient"
    return t.grad.numpy()


def test_backward_accumulates_into_grad() -> None:
    x, a = leaf()
    loss = (x * x).sum()
    loss.backward()
    np.testing.assert_allclose(grad_of(x), 2 * a, rtol=1e-6)
    loss.backward()  # the same loss again: the gradient adds up
    np.testing.assert_allclose(grad_of(x), 4 * a, rtol=1e-6)
    (x * 3).sum().backward()  # a different loss adds its own
    np.testing.assert_allclose(grad_of(x), 4 * a + 3, rtol=1e-6)
    x.grad = None  # what an optimizer's zero_grad does
    x.sum().backward()
    np.testing.assert_allclose(grad_of(x), np.ones_like(a))


def test_leaf_used_twice_and_leaves_off_the_path() -> None:
    x, a = leaf(1)
    y, b = leaf(2)
    unused, _ = leaf(3)
    loss = (x * y + x.exp() * 2).sum()
    loss.backward()
    np.testing.assert_allclose(grad_of(x), b + 2 * np.exp(a), rtol=1e-5)
    np.testing.assert_allclose(grad_of(y), a, rtol=1e-6)
    assert unused.grad is None
    constant = Tensor(a)  # requires_grad is off: never gets a gradient
    (constant * x).sum().backward()
    assert constant.grad is None


def test_item_before_backward_and_after_detach() -> None:
    x, a = leaf(4)
    loss = (x * x).sum()
    assert loss.item() == pytest.approx(float((a.astype(np.float64) ** 2).sum()), rel=1e-5)
    loss.backward()  # reading the value first must not cut the graph the gradient flows through
    np.testing.assert_allclose(grad_of(x), 2 * a, rtol=1e-6)
    d = loss.detach()
    assert d.item() == loss.item()
    assert not d.requires_grad


def test_gradient_flows_through_a_realized_intermediate() -> None:
    x, a = leaf(5)
    h = (x * 2).realize()
    np.testing.assert_allclose(h.numpy(), 2 * a, rtol=1e-6)
    (h * h).sum().backward()
    np.testing.assert_allclose(grad_of(x), 8 * a, rtol=1e-6)


def test_backward_of_a_one_element_tensor_that_is_not_0d() -> None:
    x, a = leaf(6)
    x.sum(keepdim=True).backward()  # shape (1, 1)
    np.testing.assert_allclose(grad_of(x), np.ones_like(a))
    x.grad = None
    (x[:1, 1:2] * 3).backward()
    want = np.zeros_like(a)
    want[0, 1] = 3
    np.testing.assert_allclose(grad_of(x), want)


def test_detach_and_no_grad() -> None:
    x, a = leaf(7)
    d = x.detach()
    assert not d.requires_grad and x.requires_grad
    np.testing.assert_array_equal(d.numpy(), a)
    with Tensor.no_grad():
        y = x * 3
        assert not y.requires_grad
        with Tensor.no_grad():
            pass
        z = x * 4  # the inner block ending does not switch tracking back on
        assert not z.requires_grad
    assert (x * 1).requires_grad
    np.testing.assert_allclose(y.numpy(), 3 * a, rtol=1e-6)
    (y + z + x).sum().backward()
    np.testing.assert_allclose(grad_of(x), np.ones_like(a))


def test_no_grad_ends_with_an_exception() -> None:
    x, _ = leaf(8)
    with pytest.raises(RuntimeError), Tensor.no_grad():
        raise RuntimeError("inside")
    assert (x * 2).requires_grad


def test_gradient_of_max_with_ties_is_split() -> None:
    """Not differentiable at a tie; uopc, like PyTorch's max(), shares the gradient equally."""
    x = Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], np.float32), requires_grad=True)
    x.max(1).sum().backward()
    np.testing.assert_allclose(grad_of(x), [[0, 0.5, 0.5], [0.5, 0.5, 0]])
    x.grad = None
    a = Tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    b = Tensor(np.array([3.0, 2.0, 1.0], np.float32), requires_grad=True)
    a.maximum(b).sum().backward()
    np.testing.assert_allclose(grad_of(a), [0, 0.5, 1])
    np.testing.assert_allclose(grad_of(b), [1, 0.5, 0])


def test_gradient_of_maximum_with_nan_reaches_both_operands_as_in_pytorch() -> None:
    """max(a, NaN) is NaN: neither operand lost and there is no tie, so each gets the whole gradient
    (PyTorch's rule: a loses it only where a < b). The old rule gave it to b alone."""
    nan = float("nan")
    a = Tensor(np.array([1.0, nan, nan, 2.0], np.float32), requires_grad=True)
    b = Tensor(np.array([nan, 1.0, nan, 1.0], np.float32), requires_grad=True)
    (a.maximum(b) + a.minimum(b)).sum().backward()
    np.testing.assert_array_equal(grad_of(a), [2, 2, 2, 1])  # 2 > 1: a wins max, b wins min
    np.testing.assert_array_equal(grad_of(b), [2, 2, 2, 1])


def test_std_of_equal_values_has_gradient_zero_as_in_pytorch() -> None:
    """std is not differentiable where it is 0; d sqrt(v) = dv / (2 sqrt(v)) would make it 0/0 = NaN,
    and one such row poisons a training step. PyTorch gives 0 there; so does uopc."""
    x = Tensor(np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], np.float32), requires_grad=True)
    x.std(1, correction=0).sum().backward()
    a = np.array([1.0, 2.0, 4.0])
    expected = (a - a.mean()) / (a.size * a.std())
    np.testing.assert_allclose(grad_of(x), [[0, 0, 0], expected], rtol=1e-6)


def test_argmax_and_comparisons_carry_no_gradient() -> None:
    x, a = leaf(9, (3, 5))
    y = x.argmax(1).float().unsqueeze(1) + (x > 0).float()
    assert not y.requires_grad
    (y * x).sum().backward()
    np.testing.assert_allclose(grad_of(x), a.argmax(1)[:, None] + (a > 0), rtol=1e-6)


def test_abs_has_gradient_zero_at_zero_as_in_pytorch() -> None:
    """d|x|/dx is sign(x); at 0 the subgradient PyTorch picks, and the one softplus tricks rely on, is 0."""
    x = Tensor(np.array([-2.0, 0.0, 3.0], dtype=np.float32), requires_grad=True)
    x.abs().sum().backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [-1.0, 0.0, 1.0])
