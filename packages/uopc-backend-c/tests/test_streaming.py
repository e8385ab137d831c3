"""Streaming stores: a large output that lowering marks (LinearProgram.streamed) is computed a block at a
time into a buffer on the stack and written around the cache. Only the route to memory changes, so the bits
must be those of the same program with ordinary stores, wherever the output starts and however its length
falls on the blocks; and a plan built at -O0 must compute what the -O3 build does (the tiered build)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uopc.backend.c import C_BACKEND, DEFAULT_CFLAGS, Program, RenderError, numpy_dtype, render_c
from uopc.backend.c.render import STREAM_BLOCK
from uopc.ir import DType, Ops, UOp, dtypes
from uopc.lower import Kernel, LinearProgram, Opts, compile_plan, linearize, make_plan, normalize, rangeify
from uopc.lower.opt import STREAM_MIN_BYTES

Array = npt.NDArray[Any]

# name: (inputs, the value over input buffers of n elements, its dtype, numpy's answer or None)
CASES: dict[str, tuple[int, Callable[[list[UOp]], UOp], DType, Callable[[list[Array]], Array] | None]] = {
    "copy": (1, lambda xs: UOp(Ops.CONTIGUOUS, xs[0].dtype, (xs[0],)), dtypes.float32, lambda xs: xs[0].copy()),
    "mul-add": (3, lambda xs: xs[0] * xs[1] + xs[2], dtypes.float32, lambda xs: xs[0] * xs[1] + xs[2]),
    "relu": (1, lambda xs: (xs[0] <= 0.0).where(0.0, xs[0]), dtypes.float32, lambda xs: np.where(xs[0] <= 0, 0, xs[0])),
    "to float64": (1, lambda xs: xs[0].cast(dtypes.float64).exp(), dtypes.float64, None),
    "to bfloat16": (1, lambda xs: xs[0].cast(dtypes.bfloat16), dtypes.bfloat16, None),
}


def program_of(case: str, n: int) -> LinearProgram:
    """The case's kernel over n elements, threaded, as lowering linearizes it (output in the last slot)."""
    reads, value_of, _, _ = CASES[case]
    value = value_of([UOp.buffer(i, n) for i in range(reads)])
    out = UOp.buffer(reads, n, value.scalar_dtype)
    return linearize(Kernel(f"k_{n}", rangeify([(out, value)]), Opts(thread=0)))


def inputs_of(case: str, n: int, seed: int) -> list[Array]:
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(CASES[case][0])]
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e38], np.float32)
    xs[0][::5] = rng.choice(specials, xs[0][::5].size)  # each op must keep them as numpy does
    return xs


def run(program: LinearProgram, inputs: list[Array], offset: int) -> Array:
    """The program's output, written into a larger array `offset` elements from its start (other alignments
    than the allocator's); the elements around it must stay as they were."""
    n = program.params[-1].size
    room = np.full(n + offset + 16, 7, numpy_dtype(program.params[-1].dtype))
    out = room[offset : offset + n]
    Program(render_c(program), program.name)(*inputs, out)
    untouched = np.concatenate([room[:offset], room[offset + n :]])
    assert (untouched == 7).all(), "a streamed store wrote outside its output"
    return out.copy()


@pytest.mark.o0
@settings(max_examples=25, deadline=None)
@given(
    case=st.sampled_from(list(CASES)),
    n=st.sampled_from([2, 15, 17, STREAM_BLOCK - 1, STREAM_BLOCK + 1, 3 * STREAM_BLOCK + 5]),
    offset=st.integers(0, 17),
    seed=st.integers(0, 2**32 - 1),
)
def test_streamed_outputs_have_the_bits_of_ordinary_stores(case: str, n: int, offset: int, seed: int) -> None:
    program = program_of(case, n)
    streamed = dataclasses.replace(program, streamed=frozenset({program.params[-1].slot}))
    ordinary = dataclasses.replace(program, streamed=frozenset())
    assert "stream_out(" in render_c(streamed) and "stream_out(" not in render_c(ordinary)
    inputs = inputs_of(case, n, seed)
    got = run(streamed, inputs, offset)
    assert got.tobytes() == run(ordinary, inputs, offset).tobytes()
    numpy_op = CASES[case][3]
    if numpy_op is not None:  # and those are numpy's
        with np.errstate(all="ignore"):
            assert got.tobytes() == numpy_op(inputs).astype(got.dtype).tobytes()


def test_lowering_streams_large_outputs_and_keeps_ordinary_stores_for_small_ones() -> None:
    floats = STREAM_MIN_BYTES // 4
    assert program_of("relu", floats).streamed == {1}
    assert program_of("relu", floats - 1).streamed == set()
    assert "stream_out(" not in render_c(program_of("relu", floats - 1))


def plan_result(value: UOp, inputs: list[Array], flags: str, monkeypatch: pytest.MonkeyPatch) -> Array:
    """`value` through the whole pipeline (make_plan chooses threads), built with CFLAGS=`flags`."""
    monkeypatch.setenv("CFLAGS", flags)
    graph, _ = normalize([value])
    plan = make_plan(graph)
    compiled = compile_plan(plan, C_BACKEND)
    assert "stream_out(" in compiled.source.text
    buffers = [*inputs, *(C_BACKEND.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :])]
    compiled.executable.run(buffers)
    result: Array = buffers[plan.outputs[0]]
    return result


@pytest.mark.parametrize("level", ["-O0", "-O1"])
def test_a_streamed_plan_computes_the_same_bits_at_every_optimization_level(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = STREAM_MIN_BYTES // 4 + 3
    xs = [UOp.buffer(i, n) for i in range(3)]
    inputs = inputs_of("mul-add", n, 116)
    fast = plan_result(xs[0] * xs[1] + xs[2], inputs, DEFAULT_CFLAGS.replace("-O3", level), monkeypatch)
    optimized = plan_result(xs[0] * xs[1] + xs[2], inputs, DEFAULT_CFLAGS, monkeypatch)
    with np.errstate(all="ignore"):
        assert fast.tobytes() == optimized.tobytes() == (inputs[0] * inputs[1] + inputs[2]).tobytes()


def test_a_streamed_store_off_the_threaded_index_is_refused() -> None:
    """The renderer writes a streamed buffer a block of the threaded loop at a time: a store elsewhere (here,
    in a loop with no threads) would land in a block buffer that is never written out."""
    program = linearize(Kernel("k", rangeify([(UOp.buffer(1, 64), UOp.buffer(0, 64) + 1.0)])))
    with pytest.raises(RenderError, match="streamed store to data1 must be at the threaded loop's index"):
        render_c(dataclasses.replace(program, streamed=frozenset({1})))
