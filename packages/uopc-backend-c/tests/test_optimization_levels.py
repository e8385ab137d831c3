"""The C text alone fixes every result: a plan built at -O0 or -O1 computes, bit for bit, what the same plan
built at -O3 computes. The tiered build (compiler.py) runs a first step on a quickly built library and later
steps on the -O3 one, which is only allowed because of this.

Before the reorderings were written into the source, gcc chose them: `#pragma omp simd reduction` let -O3
split a sum into as many lanes as its vectors held, and `optimize("fp-contract=fast")` let it fuse
multiply-adds; at -O0 it did neither, and the sums, matmuls, softmax and layernorm below differed in their
last bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from uopc.backend.c import C_BACKEND, DEFAULT_CFLAGS, compiler, render
from uopc.ir import Ops, UOp
from uopc.lower import compile_plan, make_plan, normalize

Array = npt.NDArray[Any]


def matmul(a: UOp, b: UOp) -> UOp:
    (n, k), (_, m) = a.shape, b.shape
    left = a.reshape((n, 1, k)).expand((n, m, k))
    right = b.permute((1, 0)).reshape((1, m, k)).expand((n, m, k))
    return (left * right).sum([2]).reshape((n, m))


def softmax(x: UOp) -> UOp:
    e = (x - x.reduce(Ops.MAX, [1]).expand(x.shape)).exp()
    return e / e.sum([1]).expand(x.shape)


def layernorm(x: UOp) -> UOp:
    n = x.shape[1]
    centered = x - (x.sum([1]) * (1.0 / n)).expand(x.shape)
    variance = (centered * centered).sum([1]) * (1.0 / n)
    return centered / (variance + 1e-5).sqrt().expand(x.shape)


def cases() -> dict[str, tuple[UOp, list[tuple[int, int]]]]:
    """Each case's value and its inputs' shapes; the shapes make long reduce loops that get lanes and
    register tiles that fuse, and a weight gradient whose loads stride."""
    x, w = UOp.buffer(0, 16 * 64).reshape((16, 64)), UOp.buffer(1, 64 * 48).reshape((64, 48))
    g = UOp.buffer(1, 16 * 48).reshape((16, 48))
    return {
        "row sums": (x.sum([1]), [(16, 64)]),
        "column sums": (x.sum([0]), [(16, 64)]),
        "matmul": (matmul(x, w), [(16, 64), (64, 48)]),
        "weight gradient": (matmul(x.permute((1, 0)), g), [(16, 64), (16, 48)]),
        "softmax": (softmax(x), [(16, 64)]),
        "layernorm": (layernorm(x), [(16, 64)]),
    }


def run_at(flags: str, value: UOp, inputs: list[Array], monkeypatch: pytest.MonkeyPatch, pack: int = 0) -> Array:
    """`value` computed by a library built with CFLAGS=`flags`, the optimizer choosing its opts."""
    monkeypatch.setenv("CFLAGS", flags)
    graph, _ = normalize([value])
    plan = make_plan(graph, True, pack)
    compiled = compile_plan(plan, C_BACKEND)
    buffers = [*inputs, *(C_BACKEND.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :])]
    compiled.executable.run(buffers)
    result: Array = buffers[plan.outputs[0]]
    return result


@pytest.mark.parametrize("level", ["-O0", "-O1"])
@pytest.mark.parametrize("case", list(cases()))
def test_a_plan_computes_the_same_bits_at_every_optimization_level(
    case: str, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, shapes = cases()[case]
    rng = np.random.default_rng(85)
    inputs = [rng.standard_normal(shape).astype(np.float32).reshape(-1) * 3.0 for shape in shapes]
    fast = run_at(DEFAULT_CFLAGS.replace("-O3", level), value, inputs, monkeypatch)
    optimized = run_at(DEFAULT_CFLAGS, value, inputs, monkeypatch)
    assert fast.tobytes() == optimized.tobytes()


@pytest.mark.parametrize("case", list(cases()))
def test_the_quick_tier_with_its_hot_kernels_at_o1_computes_the_bits_of_o3(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quick build of a tiered build is -O0 with the hot kernels at -O1, by a function attribute in an
    -O0 translation unit (render.HOT_FLOPS); here every kernel is hot."""
    monkeypatch.setattr(render, "HOT_FLOPS", 0)
    quick = compiler.quick_flags(compiler.TIERED_MIN_CHARS, DEFAULT_CFLAGS)
    assert quick is not None and compiler.HOT_ATTRIBUTE in quick
    value, shapes = cases()[case]
    rng = np.random.default_rng(96)
    inputs = [rng.standard_normal(shape).astype(np.float32).reshape(-1) * 3.0 for shape in shapes]
    fast = run_at(quick, value, inputs, monkeypatch)
    assert fast.tobytes() == run_at(DEFAULT_CFLAGS, value, inputs, monkeypatch).tobytes()


@pytest.mark.parametrize("level", ["-O0", "-O1"])
def test_a_packed_matmul_with_vector_fmas_computes_the_same_bits_at_every_level(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packed matmul's register tile is vectors, fused by the vector FMA helper (fma_f32x16), which names
    the machine's instruction where it has one and loops over fmaf where not: one rounding either way."""
    a, b = UOp.buffer(0, 128 * 192).reshape((128, 192)), UOp.buffer(1, 192 * 128).reshape((192, 128))
    rng = np.random.default_rng(86)
    inputs = [rng.standard_normal(n).astype(np.float32) for n in (128 * 192, 192 * 128)]
    fast = run_at(DEFAULT_CFLAGS.replace("-O3", level), matmul(a, b), inputs, monkeypatch, pack=1)
    optimized = run_at(DEFAULT_CFLAGS, matmul(a, b), inputs, monkeypatch, pack=1)
    assert fast.tobytes() == optimized.tobytes()
    want = inputs[0].reshape(128, 192).astype(np.float64) @ inputs[1].reshape(192, 128).astype(np.float64)
    np.testing.assert_allclose(optimized.reshape(128, 128), want, rtol=1e-4, atol=1e-4)
