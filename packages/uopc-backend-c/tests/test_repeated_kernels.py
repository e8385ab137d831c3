"""Kernels equal but for the buffers they run on: a model's repeated layers. The driver applies the opts
and linearizes such a kernel once, the C renderer writes its function once, and each step of the plan still
runs it on its own buffers."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from uopc.backend.c import C_BACKEND
from uopc.ir import UOp
from uopc.lower import Backend, Plan, compile_plan, linearize, make_plan, normalize

N, K = 8, 16


def dense(x: UOp, w: UOp) -> UOp:
    """relu(x @ w.T) for an N x K input and a K x K weight."""
    product = x.reshape((N, 1, K)).expand((N, K, K)) * w.reshape((1, K, K)).expand((N, K, K))
    return product.sum([2]).reshape((N, K)).maximum(0.0)


def two_layers() -> tuple[Plan, list[Any]]:
    """h = dense(x, w1), y = dense(h, w2): one kernel twice, on other buffers, with its inputs."""
    x = UOp.buffer(0, N * K).reshape((N, K))
    w1, w2 = (UOp.buffer(i, K * K).reshape((K, K)) for i in (1, 2))
    h = dense(x, w1)
    graph, _ = normalize([h, dense(h, w2)])
    rng = np.random.default_rng(96)
    inputs = [rng.standard_normal(size).astype(np.float32) for size in (N * K, K * K, K * K)]
    return make_plan(graph, True), inputs


def outputs(plan: Plan, backend: Backend, inputs: list[Any]) -> list[Any]:
    compiled = compile_plan(plan, backend)
    buffers = [*inputs, *(backend.runtime.allocate(b.dtype, b.size) for b in plan.buffers[plan.n_inputs :])]
    compiled.executable.run(buffers)
    return [buffers[o].copy() for o in plan.outputs]


@pytest.mark.o0
def test_a_repeated_layer_is_lowered_once_and_each_step_runs_on_its_own_buffers() -> None:
    plan, inputs = two_layers()
    first, second = plan.kernels
    assert first.ast is second.ast and first.opts == second.opts and first.name != second.name
    assert plan.steps[0].buffers != plan.steps[1].buffers
    compiled = compile_plan(plan, C_BACKEND)
    assert compiled.programs[0].uops == compiled.programs[1].uops  # linearized once, renamed
    assert compiled.source.text.count(f"void {first.name}(") == 2  # defined once, declared for uopc_plan
    h, y = outputs(plan, C_BACKEND, inputs)
    x, w1, w2 = (a.astype(np.float64) for a in inputs)
    expected_h = np.maximum(x.reshape(N, K) @ w1.reshape(K, K).T, 0)
    np.testing.assert_allclose(h, expected_h.reshape(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, np.maximum(expected_h @ w2.reshape(K, K).T, 0).reshape(-1), rtol=1e-5, atol=1e-4)


@pytest.mark.o0
def test_a_repeated_layer_lowered_once_computes_the_bits_of_one_lowered_for_each_step() -> None:
    plan, inputs = two_layers()
    each_on_its_own = dataclasses.replace(C_BACKEND, store=None, linearize=linearize)  # no memo in the driver
    once = outputs(plan, C_BACKEND, inputs)
    again = outputs(plan, each_on_its_own, inputs)
    assert [a.tobytes() for a in once] == [a.tobytes() for a in again]
