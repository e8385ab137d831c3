"""Attention without the score matrix (uopc.tensor.attention), online and tiled, against the plain composition
and numpy in float64: values and gradients, causal or not, at odd lengths (L != S both ways, lengths that are
no multiple of the tiles), and the promise that no buffer of either kernel holds L * S elements."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.ir import dtypes
from uopc.tensor import Tensor, TensorError
from uopc.tensor.attention import (
    KEY_TILE,
    QUERY_BLOCK,
    online_attention_kernel,
    run_kernel,
    tiled_attention_kernel,
    tiled_key_grads_kernel,
    tiled_query_grads_kernel,
)
from uopc.tensor.nn import CausalSelfAttention, MultiHeadAttention

pytestmark = pytest.mark.c_backend  # the kernels' loops differ in length per query: C only (see the refusal test)
Array = npt.NDArray[Any]
SHAPES = [(2, 7, 7, 5, 5), (1, 13, 9, 8, 3), (3, 5, 11, 4, 6), (1, 1, 1, 2, 1), (2, 33, 33, 16, 16), (1, 6, 40, 3, 2)]
KERNELS = ["online", "tiled"]


def reference(q: Array, k: Array, v: Array, causal: bool) -> Array:
    """softmax(q k^T / sqrt(E)) v in float64; a causal query i sees keys 0..i (PyTorch's is_causal)."""
    scores = q.astype(np.float64) @ k.swapaxes(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return np.asarray((e / e.sum(-1, keepdims=True)) @ v)


def inputs(seed: int, shape: tuple[int, ...]) -> list[Array]:
    heads, length, keys, dim, value_dim = shape
    rng = np.random.default_rng(seed)
    sizes = [(heads, length, dim), (heads, keys, dim), (heads, keys, value_dim)]
    return [(rng.standard_normal(s) * 2).astype(np.float32) for s in sizes]


@pytest.mark.sanitize
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_values_match_numpy_and_the_plain_form(shape: tuple[int, ...], causal: bool, kernel: str) -> None:
    q, k, v = inputs(sum(shape), shape)
    tq, tk, tv = Tensor(q), Tensor(k), Tensor(v)
    online = tq.scaled_dot_product_attention(tk, tv, is_causal=causal, kernel=kernel).numpy()
    plain = tq.scaled_dot_product_attention(tk, tv, is_causal=causal).numpy()
    np.testing.assert_allclose(online, reference(q, k, v, causal), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(online, plain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES[:3])
def test_gradients_match_the_plain_form(shape: tuple[int, ...], causal: bool, kernel: str) -> None:
    q, k, v = inputs(7 + sum(shape), shape)
    cotangent = Tensor(np.random.default_rng(1).standard_normal(shape[:2] + shape[-1:]).astype(np.float32))
    grads = {}
    for name in ("plain", kernel):
        leaves = [Tensor(a, requires_grad=True) for a in (q, k, v)]
        out = leaves[0].scaled_dot_product_attention(leaves[1], leaves[2], is_causal=causal, kernel=name)
        (out * cotangent).sum().backward()
        grads[name] = [t.grad.numpy() for t in leaves if t.grad is not None]
    assert len(grads[kernel]) == 3
    for got, want in zip(grads[kernel], grads["plain"], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradient_matches_central_differences_in_float64(kernel: str) -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in [(1, 4, 3), (1, 5, 3), (1, 5, 2)])
    w = rng.standard_normal((1, 4, 2))

    def loss(q: Array) -> float:
        out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True, kernel=kernel)
        return float((out.numpy() * w).sum())

    tq = Tensor(q, requires_grad=True)
    out = tq.scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True, kernel=kernel)
    (out * Tensor(w)).sum().backward()
    assert tq.grad is not None and tq.grad.dtype is dtypes.float64
    step, numeric = 1e-6, np.zeros_like(q)
    for index in np.ndindex(q.shape):
        up, down = q.copy(), q.copy()
        up[index] += step
        down[index] -= step
        numeric[index] = (loss(up) - loss(down)) / (2 * step)
    np.testing.assert_allclose(tq.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def reference_grads(q: Array, k: Array, v: Array, d_out: Array, causal: bool) -> tuple[Array, Array, Array]:
    """dq, dk, dv of softmax(q k^T / sqrt(E)) v in float64, with the probability matrix written out."""
    scale = 1 / math.sqrt(q.shape[-1])
    scores = q.astype(np.float64) @ k.swapaxes(-2, -1) * scale
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    d_p = d_out @ v.swapaxes(-2, -1)
    d_s = p * (d_p - (p * d_p).sum(-1, keepdims=True)) * scale
    return d_s @ k, d_s.swapaxes(-2, -1) @ q, p.swapaxes(-2, -1) @ d_out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 7, 7, 5, 3), (1, 9, 6, 4, 4), (1, 5, 2 * KEY_TILE + 1, 3, 2), (1, 3, 11, 2, 2)])
def test_the_tiled_backward_kernels_match_numpy_in_float64(shape: tuple[int, ...], causal: bool) -> None:
    """Each backward kernel alone on float64 inputs, against the gradients written out in numpy: key and query
    counts that are no multiple of the tiles (a last tile repeats the last key or query) and keys past the
    last query (a causal query never sees them: their dk and dv are 0)."""
    heads, length, keys, dim, value_dim = shape
    rng = np.random.default_rng(sum(shape) + causal)
    q, k, v = (rng.standard_normal(s) for s in [(heads, length, dim), (heads, keys, dim), (heads, keys, value_dim)])
    d_out = rng.standard_normal((heads, length, value_dim))
    f64, scale = dtypes.float64, 1 / math.sqrt(dim)
    forward = tiled_attention_kernel(heads, length, keys, dim, value_dim, causal, scale, f64)
    outputs = [((heads, length, value_dim), f64), ((heads, length), f64)]
    out, lse = run_kernel(forward, [Tensor(a) for a in (q, k, v)], outputs)
    delta = Tensor((d_out * out.numpy()).sum(-1))
    saved = [Tensor(q), Tensor(k), Tensor(v), Tensor(d_out), lse, delta]
    key_grads = tiled_key_grads_kernel(heads, length, keys, dim, value_dim, causal, scale, f64)
    query_grads = tiled_query_grads_kernel(heads, length, keys, dim, value_dim, causal, scale, f64)
    d_k, d_v = run_kernel(key_grads, saved, [((heads, keys, dim), f64), ((heads, keys, value_dim), f64)])
    (d_q,) = run_kernel(query_grads, saved, [((heads, length, dim), f64)])
    for got, want in zip((d_q, d_k, d_v), reference_grads(q, k, v, d_out, causal), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_the_tiled_backward_matches_central_differences_in_float64_for_q_k_and_v() -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in [(1, 6, 3), (1, 7, 3), (1, 7, 2)]]  # 7 keys: two tiles, one short
    w = rng.standard_normal((1, 6, 2))

    def loss(q: Array, k: Array, v: Array) -> float:
        out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True, kernel="tiled")
        return float((out.numpy() * w).sum())

    leaves = [Tensor(a, requires_grad=True) for a in arrays]
    out = leaves[0].scaled_dot_product_attention(leaves[1], leaves[2], is_causal=True, kernel="tiled")
    (out * Tensor(w)).sum().backward()
    step = 1e-6
    for n, leaf in enumerate(leaves):
        numeric = np.zeros_like(arrays[n])
        for index in np.ndindex(arrays[n].shape):
            up, down = [a.copy() for a in arrays], [a.copy() for a in arrays]
            up[n][index] += step
            down[n][index] -= step
            numeric[index] = (loss(*up) - loss(*down)) / (2 * step)
        assert leaf.grad is not None
        np.testing.assert_allclose(leaf.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_the_gradient_reaches_leaves_behind_the_projections() -> None:
    """q, k, v computed from x: the gradient passes the kernel by its rule, then on through the graph."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 6, 4)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)
    grads = []
    for kernel in ("plain", "online"):
        tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
        h = tx @ tw
        h.scaled_dot_product_attention(h, tx, is_causal=True, kernel=kernel).square().sum().backward()
        assert tx.grad is not None and tw.grad is not None
        grads.append((tx.grad.numpy(), tw.grad.numpy()))
    for got, want in zip(grads[1], grads[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "build", [online_attention_kernel, tiled_attention_kernel, tiled_key_grads_kernel, tiled_query_grads_kernel]
)
def test_the_kernels_keep_no_score_matrix(build: Any) -> None:
    length = keys = 512
    kernel = build(1, length, keys, 64, 64, True, 0.125, dtypes.float32)
    assert max(p.size for p in kernel.params) == length * 64  # q, k, v, out and their gradients; lse is length
    assert all(p.size < length * keys for p in kernel.params)


def test_a_tile_past_the_last_query_stores_nothing_wrong() -> None:
    """length is no multiple of QUERY_BLOCK: the last tile repeats the last query, and only it."""
    length = 2 * QUERY_BLOCK + 1
    q, k, v = inputs(11, (2, length, length, 4, 3))
    out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True, kernel="tiled").numpy()
    np.testing.assert_allclose(out, reference(q, k, v, True), rtol=1e-5, atol=1e-5)


def test_refusals_name_the_problem() -> None:
    q = Tensor(np.ones((1, 3, 2), np.float32))
    with pytest.raises(TensorError, match=r"online.*takes no attn_mask"):
        q.scaled_dot_product_attention(q, q, attn_mask=Tensor(np.ones((3, 3), bool)), kernel="online")
    with pytest.raises(TensorError, match=r"online.*query \(1, 3, 2\), key \(3, 2\)"):
        q.scaled_dot_product_attention(Tensor(np.ones((3, 2), np.float32)), q, kernel="online")
    with pytest.raises(TensorError, match=r"\(tiled\): q, k and v must all be float32 or all float64, got float16"):
        h = q.half()
        h.scaled_dot_product_attention(h, h, kernel="tiled")
    with pytest.raises(TensorError, match="kernel is 'plain', 'online' or 'tiled', not 'flash'"):
        q.scaled_dot_product_attention(q, q, kernel="flash")


@pytest.mark.parametrize("kernel", KERNELS)
def test_multi_head_attention_with_a_kernel_matches_the_plain_module(kernel: str) -> None:
    x = np.random.default_rng(5).standard_normal((2, 9, 8)).astype(np.float32)
    results = []
    for name in ("plain", kernel):
        Tensor.manual_seed(0)
        layer = CausalSelfAttention(8, 2, kernel=name)
        tx = Tensor(x, requires_grad=True)
        out = layer(tx)
        out.square().sum().backward()
        assert tx.grad is not None and layer.attn.in_proj_weight.grad is not None
        results.append([out.numpy(), tx.grad.numpy(), layer.attn.in_proj_weight.grad.numpy()])
    for got, want in zip(results[1], results[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_multi_head_attention_refuses_an_unknown_kernel() -> None:
    with pytest.raises(TensorError, match="MultiHeadAttention: kernel is 'plain', 'online' or 'tiled', not 'fast'"):
        MultiHeadAttention(8, 2, kernel="fast")


def test_a_gpu_backend_is_refused_by_name() -> None:
    q = Tensor(np.ones((1, 3, 2), np.float32), device="EMU")
    with pytest.raises(TensorError, match=r"attention \(online\): runs on backends that run loops as written.*EMU"):
        q.scaled_dot_product_attention(q, q, is_causal=True, kernel="online")
