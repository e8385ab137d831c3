"""float16 and bfloat16 tensors: sums and matmuls accumulate in float32 and keep the tensor's dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from uopc.ir import dtypes
from uopc.tensor import Tensor

Array = npt.NDArray[Any]


def test_float16_sums_and_matmuls_count_past_2048() -> None:
    ones = Tensor(np.ones((2, 40000), np.float16))
    total = ones.sum(1)
    assert total.dtype is dtypes.float16
    np.testing.assert_array_equal(total.numpy(), np.full(2, 40000, np.float16))
    a, b = Tensor(np.ones((3, 4096), np.float16)), Tensor(np.ones((4096, 2), np.float16))
    product = a @ b
    assert product.dtype is dtypes.float16
    np.testing.assert_array_equal(product.numpy(), np.full((3, 2), 4096, np.float16))


def bf16(x: Any) -> Array:
    """float32 values rounded to bfloat16 (nearest, ties to even; nan stays nan), emulated on the bits."""
    f = np.asarray(x, np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = np.where(np.isnan(f), bits | 0x400000, bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def test_bfloat16_tensors_are_made_from_data_and_come_out_as_float32() -> None:
    data = [1.0, 3.14159, -0.0, np.inf, np.nan, 1e-40, 3.4e38, 1 + 2**-8, 1 + 3 * 2**-8]
    t = Tensor(data, dtype=dtypes.bfloat16)
    assert t.dtype is dtypes.bfloat16
    got = t.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, bf16(data))  # 1 + 2**-8 is a tie that goes to even (1.0)
    assert np.signbit(got[2])
    assert Tensor.full((2,), 1 + 3 * 2**-8, dtypes.bfloat16).tolist() == [1 + 2**-6, 1 + 2**-6]


def test_bfloat16_arithmetic_rounds_every_result() -> None:
    rng = np.random.default_rng(16)
    a32, b32 = bf16(rng.standard_normal((4, 8)) * 3), bf16(rng.standard_normal((4, 8)))
    a, b = Tensor(a32).cast(dtypes.bfloat16), Tensor(b32).cast(dtypes.bfloat16)
    c = np.float32(bf16(1.1))  # the constant, as bfloat16 holds it
    cases = {
        "a * 1.1 + b": (a * 1.1 + b, bf16(bf16(a32 * c) + b32)),
        "a / b - a": (a / b - a, bf16(bf16(a32 / b32) - a32)),
        "relu, max": ((a.relu() - b).maximum(a), np.maximum(bf16(np.maximum(a32, 0) - b32), a32)),
        "sqrt(|a|)": ((a * a).sqrt(), bf16(np.sqrt(bf16(a32 * a32)))),
    }
    for name, (tensor, want) in cases.items():
        assert tensor.dtype is dtypes.bfloat16, name
        np.testing.assert_array_equal(tensor.numpy(), want, err_msg=name)
    np.testing.assert_array_equal((a < b).numpy(), a32 < b32)
    # a sum accumulates in float32 and rounds once; a matmul too (each product rounded to bfloat16 first)
    np.testing.assert_allclose(a.sum(1).numpy(), bf16(a32.astype(np.float64).sum(1)), rtol=2**-8)
    products = bf16(a32[:, :, None] * b32.T[None, :, :]).astype(np.float64)
    np.testing.assert_allclose((a @ b.T).numpy(), bf16(products.sum(1)), rtol=2**-7, atol=1e-6)


def test_float16_attention_is_float32_attention_rounded_once_values_and_gradients() -> None:
    """With equal values, dq is exactly 0 (dO . v_j equals dO . out); computed in float16 steps, the rounding
    of p and out left up to 0.0156 in it, where PyTorch (which works in float32) gives 0."""
    q = np.full((2, 4, 4), 0.4739, np.float32)
    k = np.full((2, 4, 4), 3.0, np.float32)
    v = np.full((2, 4, 4), -2.693, np.float32)
    mask = np.random.default_rng(7).standard_normal((4, 4)).astype(np.float16)
    cotangent = np.random.default_rng(8).standard_normal((2, 4, 4)).astype(np.float16)
    results = {}
    for dtype in (dtypes.float16, dtypes.float32):
        leaves = [Tensor(x.astype(np.float16), requires_grad=True) for x in (q, k, v)]
        inputs = [t.cast(dtype) for t in leaves]  # the float32 run: the same float16 numbers, widened
        out = inputs[0].scaled_dot_product_attention(inputs[1], inputs[2], Tensor(mask).cast(dtype), scale=0.5)
        (out * Tensor(cotangent).cast(dtype)).sum().backward()
        assert out.dtype is dtype
        grads = [t.grad for t in leaves]
        assert all(g is not None for g in grads)
        results[dtype] = [out.numpy(), *(g.numpy() for g in grads if g is not None)]
    for half, wide in zip(results[dtypes.float16], results[dtypes.float32], strict=True):
        np.testing.assert_array_equal(half, wide.astype(np.float16))
    assert np.abs(results[dtypes.float16][1]).max() < 1e-4  # dq: 0 up to float32's rounding
